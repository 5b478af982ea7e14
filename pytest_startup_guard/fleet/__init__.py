"""The server fleet: N real processes behind one start barrier, watched one by one.

Owns ``Fleet``/``Server`` and launching them (``fleet``); ``ServerFleet``, the fixture
(``server_fleet``), with exploring every access point of a start-up (``explore``, and what it
found: ``exploration``); the readiness probes (``ready``); leased loopback ports (``ports``) and
faults put in their way (``port_faults``); the reaper that outlives a dying pytest
(``reaper``); the layered pytest-timeout marks (``timeouts``); and waking the moment a member
exits (``exit_wait``). Whole process trees are ended by ``runtime.process_group``.

May import: runtime, cache, races.
"""
