"""Imports: the import-race probe, the background-import scan, start-method checks.

Owns ``import_race`` (``probe``), ``scan_background_imports`` and its command line
(``scan``: ``python -m pytest_startup_guard.imports.scan PATH``) and the start-method and
environment-choice checks (``startmethods``). Independent of the cache, races and fleet.

May import: runtime.
"""
