"""The server fleet: N real processes behind one start barrier, watched one by one.

Owns launching a fleet and watching it come up (``launcher``), checking ``launch``'s arguments
(``launch_arguments``), what a launch returns (``fleet``: ``Fleet``; ``server``: ``Server``, one
member) and every worker process under a member, each judged on its own fate (``workers``);
``ServerFleet``, the fixture (``server_fleet``), with exploring every access point of a start-up
(``explore``, and what it found: ``exploration``); the readiness probes (``ready``), reading
members' output in bounded memory (``output``); leased loopback ports (``ports``) and faults put
in their way (``port_faults``: told or picked ports); the faults a launch takes (``fault_kinds``):
on what its processes do (``process_faults``, with ``fs_errors``, ``network_fs``,
``interleave``, ``listen_late``) and locks that do not exclude (``lock_faults``); the reaper that outlives a dying pytest (``reaper``); the layered
pytest-timeout marks (``timeouts``); and waking the moment a member exits (``exit_wait``). Whole
process trees are ended by ``runtime.process_group``.

May import: runtime, cache, remote, races.
"""
