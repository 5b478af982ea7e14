"""Settings: every option defined once, its precedence, the run's seeds and session.

Owns the options and the one function that resolves precedence (``options``), the header line
on per-target ini keys (``per_target``), the run and test seeds and the replay command
(``seeds``), the checks of the report and artifacts paths before the first test (``paths``) and
what the plugin knows for a whole run (``session``).

May import: targets.
"""
