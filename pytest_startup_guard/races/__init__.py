"""Transient races: the catalog, the ``Race`` base, triggers, armed windows and ``hub_race``.

Owns the race catalog and registry (``catalog``), when windows open and close (``triggers``),
an armed race's windows and hits (``armed``), the seeded chaos refresher process
(``refresher``) and the per-test ``HubRace`` that arms and explores (``hubrace``).

May import: settings, runtime, cache.
"""
