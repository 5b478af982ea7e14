"""Locks that do not exclude: the child side of the ``lock_not_exclusive`` fault.

On Lustre, GPFS and some NFS mounts ``flock`` (and on some, ``lockf``) returns at once for
every caller without locking anything: two processes "hold" the same lock and both write what
it was meant to protect (huggingface/huggingface_hub#4306, ibm-granite/granite.build#322).

When the controller names paths (``locks`` in its hello reply, ``watch``), this module wraps
``fcntl.flock`` and ``fcntl.lockf`` (importing ``fcntl`` only then) so that a call on a
descriptor whose file is one of those paths, or lies under one, locks nothing and returns as a
successful lock would. Each such call is reported first and waits for its reply:
``{"op": "lock", "pid", "tid", "path", "how": "flock"|"lockf", "t", "acquire", "exclusive",
"again"}``; a reply with ``"wait": seconds`` makes it sleep (at most 50 ms at a time) and ask
again (``again``). That is how the test side makes the overlap certain: the first process to
take the lock waits there until a second one has taken it too, so that both go on into what the
lock protects at once. The call is also audited (``sys.audit("fcntl.flock", fd, op)``), as the
real call would be, so the child runtime still sees it as an access. Any other descriptor,
and every call once the controller is gone, goes to the real function.

A descriptor's file is read from ``/proc/self/fd`` (Linux; elsewhere nothing is faulted). A lock
released by closing its descriptor, without ``LOCK_UN``, is not seen: the test side counts it
held until the process ends.

Built-in modules only at import (``_thread``, ``os``, ``sys``, ``time``): ``child`` imports this at
interpreter start.
"""

from __future__ import annotations

import _thread
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# fcntl's operation bits, fixed by the kernel's ABI on Linux and the BSDs (fcntl.LOCK_*).
_LOCK_SH, _LOCK_EX, _LOCK_UN = 1, 2, 8


class _Locks:
    def __init__(self) -> None:
        self.paths: tuple[str, ...] = ()  # faulted paths, resolved
        self.client: Any = None  # child.client.Client: ask(message) -> reply or None
        self.originals: tuple[Any, Any] | None = None  # fcntl.flock, fcntl.lockf before the wrap


_locks = _Locks()


def watch(paths: Any, client: Any) -> None:
    """Fault locks on ``paths`` (a list of absolute paths from the hello reply, or None: no
    fault) through ``client`` from now on. Called at each hello, a forked child's too."""
    wanted = tuple(str(path).rstrip("/") for path in paths or () if isinstance(path, str))
    _locks.paths, _locks.client = wanted, client
    if wanted and _locks.originals is None:
        _wrap()
    elif not wanted and _locks.originals is not None:
        _unwrap()


def _wrap() -> None:
    import fcntl  # an extension module: loaded only in a process whose locks are faulted

    flock, lockf = fcntl.flock, fcntl.lockf
    _locks.originals = (flock, lockf)

    def faulted_flock(fd: Any, operation: int) -> None:
        path = _faulted(fd)
        if path is None or not _pretend(path, "flock", fd, operation):
            flock(fd, operation)

    def faulted_lockf(fd: Any, cmd: int, len: int = 0, start: int = 0, whence: int = 0) -> Any:
        path = _faulted(fd)
        if path is None or not _pretend(path, "lockf", fd, cmd):
            return lockf(fd, cmd, len, start, whence)
        return None

    for wrapper, original in ((faulted_flock, flock), (faulted_lockf, lockf)):
        wrapper.__name__ = wrapper.__qualname__ = original.__name__
        wrapper.__doc__ = original.__doc__
    fcntl.flock, fcntl.lockf = faulted_flock, faulted_lockf


def _unwrap() -> None:
    fcntl = sys.modules.get("fcntl")
    originals, _locks.originals = _locks.originals, None
    if fcntl is not None and originals is not None:
        fcntl.flock, fcntl.lockf = originals  # type: ignore[attr-defined]


def _faulted(fd: Any) -> str | None:
    """The faulted path ``fd`` (a descriptor, or an object with ``fileno()``) is open on."""
    paths = _locks.paths
    if not paths or _locks.client is None:
        return None
    try:
        number = fd if type(fd) is int else fd.fileno()
        path = os.readlink(f"/proc/self/fd/{number}")
    except Exception:  # not a descriptor, or no /proc: the real call says what it says
        return None
    if path.endswith(" (deleted)"):
        return None  # an unlinked file (filelock's O_TMPFILE probe): nobody else can lock it
    for faulted in paths:
        if path == faulted or path.startswith(faulted + "/"):
            return path
    return None


def _pretend(path: str, how: str, fd: Any, operation: int) -> bool:
    """Report the call and wait as the controller says; whether it was faulted (False: the
    controller is gone, and the real call runs)."""
    client = _locks.client
    acquire = not operation & _LOCK_UN
    message = {
        "op": "lock",
        "path": path,
        "how": how,
        "acquire": acquire,
        "exclusive": bool(acquire and operation & _LOCK_EX),
        "pid": os.getpid(),
        "t": time.monotonic(),
        "tid": _thread.get_ident(),
        "again": False,
    }
    if client.ask_unobserved(message) is None:
        return False
    sys.audit(f"fcntl.{how}", fd, operation)  # as the real call: an access the runtime sees
    return True
