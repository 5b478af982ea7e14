"""The report: what one attempt of a start-up test leaves, and what the run shows of it.

Owns the per-attempt record (``record``), the artifacts folder (``artifacts``), reruns that
would hide a race (``reruns``); where a test runs, its part put on its reports (``attach``),
with its SVG timeline in pytest-html's report (``html_extras``);
where reports are logged, the run's JSON report and its schema (``run_report``) and the
terminal summary (``summary``), every file written through a temp file in its own folder
(``atomic``), every JSON file strict, never NaN (``strict_json``); renderings of the JSON
report: the text timeline (``timeline``) and the SVG timeline (``svg``), both of the rows of
``rows`` (one time zero, one row order), the standalone HTML report (``html``), and the CI
matrix merged into one table (``merge``, with the ``startup-guard-report`` command in ``cli``;
each report read as a file from anywhere, ``read_json``, and checked against the schema,
``schema_check``); every view says a fact in the words of ``words``.

May import: settings, targets, runtime, cache, races, faults, fleet, verdicts.
"""
