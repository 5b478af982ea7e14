"""Faults: what a launch puts in its processes' way, one module a kind.

Owns the one type a launch's ``faults=[...]`` takes (``kinds``), and each kind of fault: ports
told or picked (``ports``: ``port_taken``, ``same_port``, ``port_stolen``), locks that do not
exclude (``lock_not_exclusive``), and faults on what the processes do (``process``: the context
and the armed fault every such kind shares), with ``fs_error``, ``network_fs``,
``interleave`` and ``listen_late``. A fault hears the processes through the child runtime's
events (``runtime.events``); the fleet arms and closes them. Faults on the wire are the hub's
(``remote.wire_faults``).

May import: runtime, cache, remote, races.
"""
