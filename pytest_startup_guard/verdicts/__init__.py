"""Verdicts: a transient race must be survived and really hit; a corruption must fail closed.

Owns the kinds of case and their verdict words (``kinds``, standard library only: the report
says verdicts with them), the ``startup_races`` matrix and ``StartupCase`` (``cases``), where
a test's ``startup_races`` marker was written and the one it takes (``marker_places``), an
``explore=True`` case's hold on the test's launches (``exploring``), the stress rounds of
``--startup-guard-stress`` (``stress``), the words a transient verdict uses for windows and
retries (``timing``), what every kind says of one member (``members``), the verdicts that must
fail closed, on a corrupt file or a stale lock (``fail_closed``), the rebuild verdict on a
corrupt cache entry (``rebuild``) and the in-process ``assert_survives`` /
``assert_fails_closed`` (``in_process``).

May import: settings, runtime, cache, races, fleet.
"""
