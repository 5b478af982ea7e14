"""The server fleet: N real processes behind one start barrier, watched one by one.

Owns ``Fleet``/``Server`` and launching them (``fleet``), ``ServerFleet`` (``server_fleet``)
with exploring every access point of a start-up (``explore``), the readiness probes (``ready``),
leased loopback ports (``ports``), faults put in the way of those ports (``port_faults``), the
reaper that outlives a dying pytest (``reaper``), the
layered pytest-timeout marks (``timeouts``), ending whole process trees (``process_tree``) and
waking the moment a member exits (``exit_wait``).

May import: runtime, cache, races.
"""
