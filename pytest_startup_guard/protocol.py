"""What the child runtime and the controller say to each other.

Transport: a Unix stream socket, one connection per process, newline-delimited JSON. Every
message from a child gets exactly one reply line, so a child that reports an access waits until
the test side has done what it wanted to do at that access (open a race window): that wait is
what makes a trigger deterministic. Standard library only: children import this at boot.
"""

from __future__ import annotations

import json
import socket
from typing import Any

PLAN_ENV = (
    "STARTUP_GUARD_PLAN"  # JSON: {"v", "socket", "dumps", "reply_timeout", "barrier_timeout"}
)
MEMBER_ENV = "STARTUP_GUARD_MEMBER"  # "<group>:<index>" for fleet members and their descendants
ANCESTRY_ENV = "STARTUP_GUARD_ANCESTRY"  # comma-separated pids of the Python ancestors under test
PROTOCOL_VERSION = 1

# The audit events that count as an access of the cache (FACTS.md: stat-like calls raise none).
ACCESS_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError(f"not a message: {line[:80]!r}")
    return message


class LineReader:
    """Reads newline-delimited messages from a socket, keeping what is left over."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def read(self) -> bytes | None:
        """The next line, or None at end of stream."""
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line
