"""The server fleet: N real processes behind one start barrier, watched one by one.

Owns ``ServerFleet``/``Fleet``/``Server`` (``fleet``), the readiness probes (``ready``),
leased loopback ports (``ports``), faults put in the way of those ports (``port_faults``), the
reaper that outlives a dying pytest (``reaper``), the
layered pytest-timeout marks (``timeouts``) and ending whole process trees (``process_tree``).

May import: runtime, cache, races.
"""
