"""Races: the catalog, the ``Race`` base, triggers, armed windows and ``hub_race``.

Owns the ``Race`` base and what it works on (``base``), the hub races and the registry
(``catalog``), races on any shared folder (``generic``), stale locks (``locks``), locks held by
a live process (``held_locks``, the holder: ``lock_holder``), the folders a
test may race under (``roots``), when windows open and close (``triggers``), an armed race's
windows and hits (``armed``), the seeded chaos refresher process (``refresher``) and its test
side (``chaos``), what an exploration found, in the test process or in a fleet
(``exploration``), and the per-test ``HubRace`` that arms and explores (``hubrace``). The
programs it runs as processes of their own are files in ``programs/``.

May import: settings, runtime, cache.
"""
