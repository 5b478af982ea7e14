"""What an operation changes or reaches: the child side of ``record_footprint``.

When the controller asks for it (``footprint`` in its hello reply), the audit hook hands every
``FOOTPRINT_EVENTS`` event here (``note_footprint``), which reports what it changes or reaches
(``footprint_of``) without waiting for a reply: a footprint is recorded, never held. Which opens
change a file (``WRITE_FLAGS``, ``opens_for_writing``) is told here for the whole child runtime.

Built-in modules only (``os``, ``time``): children import this at interpreter start.
"""

from __future__ import annotations

import os
import time

from pytest_startup_guard.runtime.child.state import state
from pytest_startup_guard.runtime.observation import is_unobserved, set_unobserved

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The open flags that change a file (an "open" event with none of them is a read).
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# seconds: the longest a footprint notice waits for another thread's message to go first; past
# that it goes with the process's next message (``Client.notify``)
_FOOTPRINT_WAIT = 0.2


def mode_writes(mode: object) -> bool:
    """Whether an ``open`` mode may change the file: ``w``, ``a``, ``x`` or ``+`` in it."""
    return type(mode) is str and any(letter in mode for letter in "wax+")


def opens_for_writing(args: tuple[Any, ...]) -> bool:
    """Whether an ``open`` event's call (``path, mode, flags``) may change the file."""
    flags = args[2] if len(args) > 2 else None
    if type(flags) is int:
        return bool(flags & WRITE_FLAGS)
    return mode_writes(args[1] if len(args) > 1 else None)


def note_footprint(event: str, args: tuple[Any, ...]) -> None:
    """Tell the controller what this operation changes or reaches, without waiting for a
    reply: a footprint is recorded, never held."""
    client = state.client
    if client is None or is_unobserved():
        return
    set_unobserved(True)
    try:
        seen = footprint_of(event, args)
        if seen is not None:
            message = {"op": "footprint", "ev": event, "path": seen[0], "source": seen[1]}
            client.notify(
                {**message, "pid": os.getpid(), "t": time.monotonic()}, wait=_FOOTPRINT_WAIT
            )
    except Exception:  # nothing here may ever break the caller's operation
        pass
    finally:
        set_unobserved(False)


def footprint_of(event: str, args: tuple[Any, ...]) -> tuple[str, str | None] | None:
    """What the audited operation ``event`` (one of ``FOOTPRINT_EVENTS``) changes or reaches:
    ``(path, source)``, or None for an ``open`` that only reads.

    ``path`` is absolute, its folder resolved (a symlink as the last part is itself the thing
    changed, except where the operation follows it: a write, ``chmod``, ``truncate``); a file
    descriptor is named by ``/proc/self/fd`` where there is one (Linux), else ``<fd N>``. For
    ``socket.connect`` it is ``host:port`` (``[host]:port`` for IPv6) or a Unix socket's path
    (``@name`` in the abstract namespace); for ``socket.getaddrinfo`` the name looked up.
    ``source``: for ``os.rename`` the old name (changed too), for ``os.link`` and ``os.symlink``
    what the new name points at (not changed); else None. Arguments as CPython 3.8+ audits
    them (``-1``: no ``dir_fd``)."""
    if event == "open":  # (path, mode, flags)
        if type(args[0]) is int or not opens_for_writing(args):
            return None  # open(fd): a descriptor opened before, nothing new is reached
        return _where(args[0], follow=True), None
    if event == "socket.connect":  # (socket, address)
        return _address(args[1]), None
    if event == "socket.getaddrinfo":  # (host, port, family, type, protocol)
        host = args[0]
        if host is None:
            return None
        return (host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)), None
    if event == "os.rename":  # (src, dst, src_dir_fd, dst_dir_fd)
        return _where(args[1], args[3]), _where(args[0], args[2])
    if event == "os.link":  # (src, dst, src_dir_fd, dst_dir_fd)
        return _where(args[1], args[3]), _where(args[0], args[2])
    if event == "os.symlink":  # (src, dst, dir_fd): src is the link's text, as written
        return _where(args[1], args[2]), os.fsdecode(args[0])
    if event == "os.truncate":  # (path or descriptor, length)
        return _where(args[0], follow=True), None
    # os.mkdir (path, mode, dir_fd), os.chmod (path, mode, dir_fd), os.remove and os.rmdir
    # (path, dir_fd)
    return _where(args[0], args[-1], follow=event == "os.chmod"), None


def _where(path: Any, dir_fd: Any = -1, follow: bool = False) -> str:
    """The absolute path an operation on ``path`` (relative to ``dir_fd``) reaches."""
    if type(path) is int:
        return _descriptor_path(path)
    text: str = os.fsdecode(path)
    if not text.startswith("/"):
        base = _descriptor_path(dir_fd) if type(dir_fd) is int and dir_fd >= 0 else os.getcwd()
        text = f"{base}/{text}"
    head, _, last = text.rpartition("/")
    if follow or last in ("", ".", ".."):
        return os.path.realpath(text)
    return os.path.join(os.path.realpath(head or "/"), last)


def _descriptor_path(descriptor: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{descriptor}")
    except OSError:
        return f"<fd {descriptor}>"


def _address(address: Any) -> str:
    """``host:port``, ``[host]:port``, a Unix socket's absolute path, or ``@name``."""
    if type(address) is tuple and len(address) >= 2:
        host = address[0]
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        return f"[{host}]:{address[1]}" if ":" in str(host) else f"{host}:{address[1]}"
    if isinstance(address, (str, bytes)):
        text = os.fsdecode(address)
        return "@" + text[1:] if text.startswith("\0") else _where(text)
    return repr(address)
