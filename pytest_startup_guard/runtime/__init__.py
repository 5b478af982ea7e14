"""The child runtime: what runs inside every Python process of a test, and its controller.

Owns the ``.pth`` boot hook (``boot``), the child side (the ``child`` package: its connection to
the controller, audit hook, start barrier, stack dumps, exits and reaps, forks, multiprocessing
workers, access events; a probe's close and the faulted locks, ``child.ports`` and
``child.locks``; the writer's pause after an open, ``child.steps``), the controller in the test
process (``controller``; its socket, ``server``; who each message may speak for, ``senders``; a
fleet's start barrier, ``barrier``; how long it held each process, ``holds``; a live
process's stacks, ``stacks``), their wire protocol (``protocol``), the flag that hides the
plugin's own file operations (``observation``), the ``startup-guard-probe`` console script
(``probe``) and, on the test side, starting a process in a session of its own and ending its
whole group (``process_group``), the run's marker in every started process's environment
(``run_marker``), telling a process by its start time before signalling it
(``process_identity``), plan folders that name their owner (``plan_folder``) and what processes
wrote and reached (``footprint``); the names of the file operations users give (``operations``);
and the interposer that makes native code's file calls accesses (``native``).

Children import ``boot``, every module of ``child``, ``observation`` and ``protocol`` at
interpreter start, so those load built-in modules only
(``tests/test_child_runtime.py::test_child_side_modules_load_built_in_modules_only``); keep this
file free of imports.

May import: nothing else of the plugin (the root's ``errors`` and ``checks`` only).
"""
