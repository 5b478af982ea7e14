"""The child's connection to the controller in the test process.

Requests wait for their reply (``request``); ``ask`` asks again while the reply says "wait",
how an access, a bind, a probe's close or a faulted lock call is held; notices get no reply
(``notify``). Built-in modules only (``_socket``, ``_thread``, ``time``): children import this
at interpreter start.
"""

from __future__ import annotations

import _socket
import _thread
import time

from pytest_startup_guard.runtime.observation import is_unobserved, set_unobserved
from pytest_startup_guard.runtime.protocol import FrameReader, decode, encode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_WAIT = 0.05  # seconds: the longest a single "wait" answer makes a process sleep at once
_NOTICE_TIMEOUT = 1.0  # seconds: the longest a message without reply may take to send


class Client:
    """One connection to the controller; request/reply, one at a time (a lock per process)."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.lock = _thread.allocate_lock()
        self.sock: _socket.socket | None = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.sock.settimeout(float(plan.get("reply_timeout", 30.0)))
        self.sock.connect(plan["socket"])
        self.reader = FrameReader()
        self.pending: list[bytes] = []  # notices that found the connection busy (``notify``)

    def _take_pending(self) -> bytes:
        pending, self.pending = self.pending, []
        return b"".join(pending)

    def _receive(self, sock: _socket.socket) -> bytes | None:
        while True:
            frames = self.reader.feed(b"")
            if frames:
                return frames[0]
            chunk = sock.recv(65536)
            if not chunk:
                return None
            frames = self.reader.feed(chunk)
            if frames:
                return frames[0]

    def request(
        self, message: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any] | None:
        """Send and wait for the reply; None (and no more requests) if the controller is gone."""
        with self.lock:
            sock = self.sock
            if sock is None:
                return None
            try:
                if timeout is not None:
                    sock.settimeout(timeout)
                sock.sendall(self._take_pending() + encode(message))
                if message.get("noreply"):
                    return {}
                payload = self._receive(sock)
                if timeout is not None:
                    sock.settimeout(float(self.plan.get("reply_timeout", 30.0)))
                if payload is None:
                    raise ConnectionError("controller closed the connection")
                return decode(payload)
            except (OSError, ValueError, EOFError):
                # The test side is gone or stuck: carry on unobserved rather than hang or fail.
                self.close()
                return None

    def ask(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """``request``, asked again after each "wait" answer has been slept (at most
        ``MAX_WAIT`` at a time; ``again``, with the time now as ``t``) until another answer:
        the reply that ends the wait (an ``errno`` ends it too), or None once the controller is
        gone."""
        while True:
            reply = self.request(message)
            wait = reply.get("wait") if reply and not reply.get("errno") else None
            if not wait:
                return reply
            time.sleep(min(float(wait), MAX_WAIT))
            message = {**message, "again": True, "t": time.monotonic()}

    def ask_unobserved(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """``ask`` from inside a call of the program (a bind, a close, a lock call): this
        thread's file operations meanwhile are the plugin's own talk, not accesses, and nothing
        here may break the caller's call (None, as when the controller is gone)."""
        previous = is_unobserved()
        set_unobserved(True)
        try:
            return self.ask(message)
        except Exception:
            return None
        finally:
            set_unobserved(previous)

    def notify(self, message: dict[str, Any], wait: float = 0.0) -> None:
        """Send a message that gets no reply, never waiting for another sender longer than
        ``wait``: a signal handler (a supervisor reaping on SIGCHLD) may run while its own thread
        holds the connection, so a busy connection queues the message for the next one."""
        message["noreply"] = True
        frame = encode(message)
        acquired = self.lock.acquire(True, wait) if wait > 0 else self.lock.acquire(False)
        if not acquired:
            self.pending.append(frame)
            return
        try:
            sock = self.sock
            if sock is None:
                return
            try:
                sock.settimeout(_NOTICE_TIMEOUT)
                sock.sendall(self._take_pending() + frame)
                sock.settimeout(float(self.plan.get("reply_timeout", 30.0)))
            except OSError:
                self.close()
        finally:
            self.lock.release()

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
