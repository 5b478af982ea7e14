"""Faults: what a launch puts in its processes' way, one module a kind.

Owns the one type a launch's ``faults=[...]`` takes (``kinds``), the questions every armed
fault answers (``protocol``: ``ArmedFault``), the faults of one launch armed and closed as one
(``armed``: ``ArmedFaults``), and each kind of fault: ports told or picked (``port_taken``,
``same_port``, ``port_stolen``; what they share: ``port_base``, their engine: ``ports``), locks
that do not exclude (``lock_not_exclusive``), and faults on what the processes do (``process``:
the context and the armed fault every such kind shares), with ``fs_error``, ``network_fs``,
``interleave`` and ``listen_late``. A fault hears the processes through the child runtime's
events (``runtime.events``). Faults on the wire are the hub's (``remote.wire_faults``); they
answer the same protocol by shape.

May import: runtime, cache, remote, races.
"""
