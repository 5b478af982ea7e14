"""Imports: the import-race probe, the background-import scan, start-method checks.

Owns ``import_race`` (``probe``), ``scan_background_imports`` and its command line
(``scan``: ``python -m pytest_startup_guard.imports.scan PATH``) and the start-method and
environment-choice checks (``startmethods``; what they saw: ``startup_runs``). The probe and the
checks run fresh interpreters one way (``runner``), print their tables one way (``table``), and
keep what those interpreters run as files (``programs/``). Independent of the cache, races and
fleet.

May import: runtime.
"""
