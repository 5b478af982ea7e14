"""The audit hook: each watched access is reported, and waits for the controller's answer.

The hook (``hook``) hears every audited event of the process. An open, listdir, scandir (and
the other ``ACCESS_EVENTS``) under the watched folders is handed to the sink: in a child,
``client_sink`` reports it and waits for the answer, so that the test side can change the cache
exactly then (a synchronous trigger); an answer may fail the call with an errno, or make it
sleep and ask again. When the controller asks for them it also reports each ``socket.bind`` of
an internet address before it happens, waiting while told so (how ``same_port`` lets one
member bind before the other), and hands ``FOOTPRINT_EVENTS`` to ``footprint``. An uncaught
exception (``sys.excepthook``) marks the process failing (``exits``).

Built-in modules only (``_thread``, ``os``, ``sys``, ``time``): children import this at
interpreter start. Every module it needs is imported up front: an import inside an audit hook
nests dozens of events.
"""

from __future__ import annotations

import _thread
import os
import sys
import time

from pytest_startup_guard.runtime.child import ports
from pytest_startup_guard.runtime.child.exits import note_uncaught
from pytest_startup_guard.runtime.child.footprint import note_footprint, opens_for_writing
from pytest_startup_guard.runtime.child.state import state
from pytest_startup_guard.runtime.child.workers import watch_multiprocessing
from pytest_startup_guard.runtime.observation import is_unobserved, set_unobserved
from pytest_startup_guard.runtime.protocol import (
    ACCESS_EVENTS,
    DESCRIPTOR_EVENTS,
    FOOTPRINT_EVENTS,
    LOOK_EVENTS,
    OPENED_EVENT,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Reported only when the controller asks (``binds`` in its hello reply). Binds are rare: they
# are told apart only where an open's path is not a str, off the path of a common open.
BIND_EVENT = "socket.bind"
# Raised by the interpreter right before it prints an uncaught exception: the process fails.
# (A thread's uncaught exception raises no audit event: ``_thread._excepthook`` is wrapped.)
EXCEPTHOOK_EVENT = "sys.excepthook"
# OPENED_EVENT: raised only by a writer's process (``steps``), after an open for writing.
# LOOK_EVENTS: raised by the child runtime's own wrappers of os.stat and its kin (``looks``).
_HOOKED_EVENTS = ACCESS_EVENTS | LOOK_EVENTS | {BIND_EVENT, EXCEPTHOOK_EVENT, OPENED_EVENT}
# The access events whose path is not simply their first argument (``operation_paths``).
_TWO_PATH_EVENTS = frozenset({"os.rename", "os.symlink", "os.link"})
_ODD_PATH_EVENTS = _TWO_PATH_EVENTS | DESCRIPTOR_EVENTS
# What the audit hook looks at first: the footprint events join only where they are reported.
_hooked_events: frozenset[str] = _HOOKED_EVENTS


def hook(event: str, args: tuple[Any, ...]) -> None:
    # Called for every audited event of the process: the cheapest checks come first.
    if event not in _hooked_events:
        return
    if state.footprint and event in FOOTPRINT_EVENTS:
        note_footprint(event, args)
        if event not in _HOOKED_EVENTS:
            return  # a footprint event only: no access, no bind
    prefixes = state.prefixes
    if not prefixes or not args:
        _rare_event(event, args)
        return
    other: str | None = None
    if event in _ODD_PATH_EVENTS:
        path, other = operation_paths(event, args)
        if path is None:
            return
    else:
        path = args[0]
        if type(path) is not str:
            path = as_text(path)
            if path is None:  # a bind's or the excepthook's first argument ends up here
                _rare_event(event, args)
                return  # a file descriptor, or nothing
    # Inline, not _is_watched: every open of the process passes here (imports included).
    if not path.startswith(prefixes) and path not in state.folders:
        watched = False
        if not path.startswith("/"):
            path = os.path.join(os.getcwd(), path)
            watched = _is_watched(path, prefixes)
        if not watched:
            if other is None:
                return
            other = _absolute(other)
            if not _is_watched(other, prefixes):
                return  # a rename or link from and to places nobody watches
    if is_unobserved():
        return  # the plugin's own file operations (and the sink's) are not accesses
    sink = state.sink
    if sink is None:
        return
    failure: int | None = None
    if state.sites and event == "open":
        state.open_writes = opens_for_writing(args)
    set_unobserved(True)
    try:
        failure = sink(event, path, other)
    except Exception:  # nothing here may ever break the caller's operation
        pass
    finally:
        set_unobserved(False)
    if failure:
        # A fault the test asked for: the call fails as the system call would, raised from the
        # audit hook, which aborts the call before it runs.
        raise _os_error(failure, event, args)


def _site() -> str:
    """The code that made the access being reported: the files and lines of the call stack
    above the audit hook, hashed (the same code in the same process gives the same site). Only
    an exploration's clean run asks for it (``ACCESS_SITES_ENV``)."""
    frame: Any = sys._getframe(1)
    lines = []
    while frame is not None:
        code = frame.f_code
        if code.co_filename != __file__:  # the hook and this sink: the same for every access
            lines.append((code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return "%x" % (hash(tuple(lines)) & 0xFFFFFFFFFFFF)


def as_text(path: Any) -> str | None:
    """A path argument as text, or None for a descriptor (or anything that is not a path)."""
    if type(path) is str:
        return path
    if isinstance(path, bytes):
        return os.fsdecode(path)
    if isinstance(path, os.PathLike):
        text = os.fspath(path)
        return os.fsdecode(text) if isinstance(text, bytes) else text
    return None


def _is_watched(path: str, prefixes: tuple[str, ...]) -> bool:
    """Under a watched folder, or the folder itself (a listing of it)."""
    return path.startswith(prefixes) or path.rstrip("/") in state.folders


def set_watched(prefixes: tuple[str, ...]) -> None:
    state.prefixes = prefixes
    state.folders = frozenset(prefix.rstrip("/") for prefix in prefixes)


def _absolute(path: str) -> str:
    return path if path.startswith("/") else os.path.join(os.getcwd(), path)


def operation_paths(event: str, args: tuple[Any, ...]) -> tuple[str | None, str | None]:
    """(path, other) of an access whose path is not its first argument: a rename's old and new
    name, the new name of a link or symlink and what it points at, a lock's descriptor's path
    (``/proc/self/fd``; None where it cannot be read)."""
    if event in DESCRIPTOR_EVENTS:  # (fd, operation, ...)
        descriptor = args[0]
        if type(descriptor) is not int:
            try:
                descriptor = descriptor.fileno()  # flock accepts any object with fileno()
            except Exception:
                return None, None
        try:
            return os.readlink(f"/proc/self/fd/{descriptor}"), None
        except OSError:
            return None, None
    if len(args) < 2:
        return None, None
    first, second = as_text(args[0]), as_text(args[1])
    if event == "os.rename":  # (src, dst, src_dir_fd, dst_dir_fd)
        return first, second
    return second, first  # os.symlink (src, dst, dir_fd), os.link (src, dst, ...)


def _os_error(number: int, event: str, args: tuple[Any, ...]) -> OSError:
    """The error the system call gives: errno, its message and the path(s) as the caller gave
    them (``OSError`` picks its subclass from the errno: ENOENT is a FileNotFoundError)."""
    message = os.strerror(number)
    if event in DESCRIPTOR_EVENTS:
        return OSError(number, message)
    if event in _TWO_PATH_EVENTS and len(args) >= 2:
        return OSError(number, message, args[0], None, args[1])
    return OSError(number, message, args[0])


def _rare_event(event: str, args: tuple[Any, ...]) -> None:
    """A bind (reported when asked) or an uncaught exception (the process fails); in a spawned
    multiprocessing worker, the first events after it loaded multiprocessing (the open of
    its pipe from the parent is one) wrap the bootstrap of its process object."""
    if event == BIND_EVENT:
        if state.binds:
            _report_bind(args)
        ports.bound(args)  # a probe's close is reported when asked (port_stolen)
    elif event == EXCEPTHOOK_EVENT:
        if state.plan is not None:
            state.failing = True
            if len(args) >= 3:  # (hook, type, value, traceback)
                note_uncaught(args[1], args[2], main=True)
    elif state.spawned_worker:
        watch_multiprocessing()


def client_sink(event: str, path: str, other: str | None) -> int | None:
    """Report the access and wait for the controller's answer: the errno the call must fail
    with, or None to go on; a "wait" answer makes it sleep and ask again."""
    client = state.client
    if client is None:
        return None
    message: dict[str, Any] = {
        "op": "access",
        "ev": event,
        "path": path,
        "other": other,
        "t": time.monotonic(),
        "pid": os.getpid(),
        "tid": _thread.get_ident(),
    }
    if state.sites:
        message["site"] = _site()
        if event == "open":
            message["writes"] = 1 if state.open_writes else 0
    reply = client.ask(message)
    failure = reply.get("errno") if reply else None
    return int(failure) if failure else None


def _report_bind(args: tuple[Any, ...]) -> None:
    """Tell the controller which port this process is about to bind; wait while it says so."""
    if len(args) < 2:
        return
    address = args[1]
    if type(address) is not tuple or len(address) < 2 or type(address[1]) is not int:
        return  # a Unix socket's path, or something that is not an internet address
    client = state.client
    if client is None or is_unobserved():
        return
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    message = {
        "op": "bind",
        "host": str(host),
        "port": address[1],
        "t": time.monotonic(),
        "pid": os.getpid(),
        "tid": _thread.get_ident(),
    }
    client.ask_unobserved(message)


def set_footprint(on: bool) -> None:
    """Report ``FOOTPRINT_EVENTS`` from now on, or stop: the hook's first check grows only
    where they are reported."""
    global _hooked_events
    state.footprint = on
    _hooked_events = _HOOKED_EVENTS | FOOTPRINT_EVENTS if on else _HOOKED_EVENTS
