"""Ports a process picks itself: the child side of the ``port_stolen`` fault.

A server that picks a port itself *probes* for it: it binds a TCP socket to an internet address
(port 0, or the ports of a scan from a base such as vLLM's ``VLLM_PORT``), reads the port, and
closes the socket; later it binds that port for real, maybe in native code (PyTorch's
``TCPStore``, libzmq) where no audit event is raised. Between the close and the real bind the
port is free for anyone: that gap is the fault.

When the controller asks for it (``probes`` in its hello reply, ``watch``), this module:

- notes every socket of this process that a ``socket.bind`` audit event names (the event's
  first argument is the socket; ``bound``), by a weak reference: a probe is never kept alive;
- wraps ``_real_close`` of that socket's class (``socket.socket``, where ``close()``, the end of
  a ``with`` block and the last ``makefile`` close all end), on the first such bind: ``socket``
  is loaded then, and this module never imports it;
- at the close of a noted TCP socket bound to a port, reads the address, closes the socket, and
  then reports ``{"op": "probe", "host", "port", "pid", "t", "tid", "again"}`` and waits for the
  reply before the close returns: the test side can take the port exactly then, before the
  process can bind it again. A reply with ``"wait": seconds`` makes it sleep (at most 50 ms at
  a time) and ask again (``again``), which is how one member is held until another one probed.

A socket closed by the garbage collector without ``close()``, or given away with ``detach()``
(its descriptor stays open: the port is not free yet), is not reported.

Built-in modules only (``_thread``, ``_weakref``, ``time``, ``os``): ``child`` imports this at
interpreter start.
"""

from __future__ import annotations

import _socket
import _thread
import _weakref
import os
import time

from pytest_startup_guard.runtime.observation import is_unobserved

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_INTERNET = (_socket.AF_INET, _socket.AF_INET6)


class _Probes:
    def __init__(self) -> None:
        self.on = False  # the controller asked for probes
        self.client: Any = None  # child.client.Client: ask(message) -> reply or None
        self.bound: dict[int, Any] = {}  # id(socket) -> weak reference, of sockets bound here


_probes = _Probes()


def watch(on: bool, client: Any) -> None:
    """Report probes through ``client`` from now on (``on``), or stop. Called at each hello:
    a forked child forgets what its parent bound (closing its copy frees no port)."""
    _probes.on, _probes.client = on, client
    _probes.bound = {}


def bound(args: tuple[Any, ...]) -> None:
    """A ``socket.bind`` audit event ``(socket, address)``: note the socket if it binds an
    internet address, and have its class's close reported."""
    if not _probes.on or len(args) < 2:
        return
    sock, address = args[0], args[1]
    if type(address) is not tuple or len(address) < 2 or type(address[1]) is not int:
        return  # a Unix socket's path
    try:
        if not _wrap_close(type(sock)):
            return  # a bare _socket.socket: its close is C code, not seen
        _probes.bound[id(sock)] = _weakref.ref(sock)
    except Exception:  # nothing here may ever break the caller's bind
        pass


def _wrap_close(kind: type) -> bool:
    """Wrap ``_real_close`` of the class in ``kind``'s hierarchy that defines it, once."""
    for owner in kind.__mro__:
        real_close = owner.__dict__.get("_real_close")
        if real_close is not None:
            break
    else:
        return False
    if getattr(real_close, "startup_guard", False):
        return True

    def _real_close(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = _probe_name(self)  # read while it is open
        result = real_close(self, *args, **kwargs)
        if name is not None:
            _report(name[0], name[1])
        return result

    _real_close.startup_guard = True  # type: ignore[attr-defined]
    _real_close.__wrapped__ = real_close  # type: ignore[attr-defined]
    _real_close.__doc__ = real_close.__doc__
    owner._real_close = _real_close  # type: ignore[attr-defined]
    return True


def _probe_name(sock: Any) -> tuple[str, int] | None:
    """``(host, port)`` of a noted TCP socket bound to a port, once: else None."""
    ref = _probes.bound.pop(id(sock), None)
    if ref is None or ref() is not sock or not _probes.on:
        return None
    try:
        if sock.family not in _INTERNET or sock.type != _socket.SOCK_STREAM:
            return None
        address = sock.getsockname()
    except Exception:  # closed already, or not a socket any more
        return None
    port = address[1] if type(address) is tuple and len(address) >= 2 else 0
    if type(port) is not int or port == 0:
        return None  # never bound (a scan's bind that failed): no port was picked
    host = address[0]
    return (host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)), port


def _report(host: str, port: int) -> None:
    """Tell the controller this process probed ``port`` (closed just now); wait while the
    controller says so."""
    client = _probes.client
    if client is None or is_unobserved():
        return
    message = {
        "op": "probe",
        "host": host,
        "port": port,
        "t": time.monotonic(),
        "pid": os.getpid(),
        "tid": _thread.get_ident(),
        "again": False,
    }
    client.ask_unobserved(message)
