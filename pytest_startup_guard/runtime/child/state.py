"""What the child runtime knows of this process: one ``State``, shared by the child modules.

Built-in modules only: children import this at interpreter start.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal minus its enum import

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any

    from pytest_startup_guard.runtime.child.client import Client

    # (event, path, other) -> the errno the call must fail with, or None: it proceeds
    AccessSink = Callable[[str, str, "str | None"], "int | None"]

# SIGURG's default action is to ignore it: a dump request that reaches a process before it
# registered its handler (or after an exec reset it) can never kill that process.
DUMP_SIGNAL: int = _signal.SIGURG


class State:
    plan: dict[str, Any] | None = None
    client: Client | None = None
    prefixes: tuple[str, ...] = ()  # the watched folders, each ending in /
    folders: frozenset[str] = frozenset()  # the same without the /: a listing of one of them
    sink: AccessSink | None = None
    binds = False  # report socket.bind events (the controller asked for them)
    footprint = False  # report FOOTPRINT_EVENTS (the controller asked for them)
    member: str | None = None
    ancestry: tuple[int, ...] = ()
    dump_file: IO[str] | None = None
    dump_path: str | None = None
    hook_installed = False
    fork_handler_installed = False
    owner_pid = 0  # the pid the in-process sink belongs to
    failing = False  # an uncaught exception or a failing sys.exit: it exits with a failure
    exit_watched = False  # sys.exit, os._exit, the waits and the exit handler are wrapped
    # what exits.watch_exit replaced: (owner, attribute, original, wrapper), for fork._stand_down
    wrapped: tuple[tuple[Any, str, Any, Any], ...] = ()
    main_tid = 0  # the thread that runs the program: a sys.exit elsewhere ends only a thread
    exit_status: int | None = None  # the status it is exiting with, where it knows it
    cause: str | None = None  # its first uncaught exception, "TypeName: message"
    said_bye = False
    spawned_worker = False  # a multiprocessing spawn worker whose bootstrap is not wrapped yet
    sites = False  # ACCESS_SITES_ENV: each access report names the code that made it
    open_writes = False  # with sites: whether the open being reported writes


state = State()
