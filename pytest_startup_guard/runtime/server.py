"""The controller's end of the plan's socket: who may connect, and reading their messages.

A ``PlanServer`` listens on the plan's Unix socket, serves only processes of this user (the
kernel's peer credentials, where it tells them), reads each connection's framed messages on a
thread of its own and hands each decoded message to the controller (``handle``), which replies
on the connection's socket; a connection that closes, or goes away before its answer, is
dropped and told (``dropped``). Every wait has a deadline: it never blocks pytest forever.
"""

from __future__ import annotations

import os
import select
import selectors
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_startup_guard.runtime.events import ProcessRecord
from pytest_startup_guard.runtime.observation import set_unobserved
from pytest_startup_guard.runtime.process_identity import peer_credentials
from pytest_startup_guard.runtime.protocol import FrameReader, decode


@dataclass(eq=False)  # one per socket: compared and hashed by identity (``_connections``)
class Connection:
    sock: socket.socket
    reader: FrameReader
    pid: int | None = None
    peer_pid: int | None = None  # who connected, from the kernel (None: not told on this system)
    hello_pid: int | None = None  # the pid its hello named (any hello, also a native one's)
    record: ProcessRecord | None = None  # of its hello: an exec'd pid has a newer one
    handling: int = 0  # messages read off its socket and not handled yet (``in_flight``)


class PlanServer:
    """Serves the plan's socket at ``path`` on its own thread until ``close``."""

    def __init__(
        self,
        handle: Callable[[Connection, dict[str, Any]], None],
        dropped: Callable[[Connection], None],
        errors: list[str],
    ) -> None:
        self._handle = handle
        self._dropped = dropped
        self._errors = errors  # a bad message is kept here, and serving goes on
        self._lock = threading.Lock()
        self._connections: set[Connection] = set()  # read by in_flight() under the lock
        self._server: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wakeup: tuple[socket.socket, socket.socket] | None = None
        self._thread: threading.Thread | None = None
        self._closing = False

    def start(self, path: str) -> None:
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(path)
        self._server.listen(128)
        self._server.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._server, selectors.EVENT_READ, None)
        self._wakeup = socket.socketpair()
        self._wakeup[0].setblocking(False)
        self._selector.register(self._wakeup[0], selectors.EVENT_READ, "wakeup")
        self._thread = threading.Thread(
            target=self._serve, name="startup-guard-controller", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving: wake the thread, wait for it, close every socket."""
        self._closing = True
        if self._wakeup is not None:
            try:
                self._wakeup[1].send(b"x")
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self._selector is not None:
            for key in list(self._selector.get_map().values()):
                try:
                    key.fileobj.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            self._selector.close()
        if self._wakeup is not None:
            self._wakeup[1].close()

    def in_flight(self) -> bool:
        """Whether a message of some process has reached the server (or its socket) and is not
        handled yet."""
        with self._lock:
            connections = list(self._connections)
        if any(connection.handling > 0 for connection in connections):
            return True
        sockets = [connection.sock for connection in connections if connection.sock.fileno() >= 0]
        try:
            readable, _, _ = select.select(sockets, [], [], 0)
        except (OSError, ValueError):
            return False
        return bool(readable)

    def _serve(self) -> None:
        assert self._selector is not None and self._server is not None
        # Whatever this thread does to the watched folders (a listener that looks at the cache
        # to judge an access) is the plugin's own, never an access of the test process.
        set_unobserved(True)
        while not self._closing:
            try:
                ready = self._selector.select(timeout=1.0)
            except OSError:
                return
            for key, _mask in ready:
                if key.data == "wakeup":
                    return
                if key.data is None:
                    self._accept()
                else:
                    self._read(key.data)

    def _accept(self) -> None:
        assert self._server is not None and self._selector is not None
        while True:
            try:
                sock, _ = self._server.accept()
            except (BlockingIOError, OSError):
                return
            # Who connected, as the kernel saw it at connect(): only our own user's processes
            # are served (the folder is private: only root could come in besides).
            credentials = peer_credentials(sock)
            if credentials is not None and credentials[1] != os.geteuid():
                sock.close()
                continue
            sock.setblocking(True)
            sock.settimeout(5.0)  # replies are tiny; a child that stops reading is dropped
            connection = Connection(sock, FrameReader())
            if credentials is not None:
                connection.peer_pid = credentials[0]
            with self._lock:
                self._connections.add(connection)
            self._selector.register(sock, selectors.EVENT_READ, connection)

    def _read(self, connection: Connection) -> None:
        try:
            chunk = connection.sock.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(connection)
            return
        payloads = connection.reader.feed(chunk)
        connection.handling = len(payloads)
        for payload in payloads:
            try:
                self._handle(connection, decode(payload))
            except (BrokenPipeError, ConnectionResetError):
                # It went away before its answer (killed at a time-out): it is gone, no error.
                connection.handling = 0
                self._drop(connection)
                return
            except Exception as error:  # a bad message must not stop the controller
                self._errors.append(f"controller: {type(error).__name__}: {error}")
            finally:
                connection.handling -= 1

    def _drop(self, connection: Connection) -> None:
        assert self._selector is not None
        try:
            self._selector.unregister(connection.sock)
        except (KeyError, ValueError):
            pass
        connection.sock.close()
        with self._lock:
            self._connections.discard(connection)
        self._dropped(connection)


__all__ = ["Connection", "PlanServer"]
