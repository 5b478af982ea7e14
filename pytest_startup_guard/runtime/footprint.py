"""What the processes of a test changed on disk and reached on the network, as they said it.

``RuntimeController.record_footprint()`` asks every process that says hello from then on to
report each of its ``FOOTPRINT_EVENTS`` before it happens (``child.footprint_of``): an open
that writes, a rename, mkdir, remove, rmdir, symlink, link, truncate or chmod, a connect and a
name lookup. The controller keeps them in ``footprint``, one ``FootprintEvent`` each, in the
order they arrived. Each event keeps the name of its audit event as its ``op``, the way access
events do, so a file operation can become a race's access point under the same name.

What it cannot see: processes that are not Python or do not run the child runtime (``python
-S``, a plan removed from their environment), operations in C that raise no audit event, and
the few notices a process queued behind a message of another of its threads and never sent
because it was killed (``SIGKILL``) before its next message.

The test side only: standard library at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_startup_guard.runtime.protocol import FOOTPRINT_EVENTS

NETWORK_OPS = frozenset({"socket.connect", "socket.getaddrinfo"})


@dataclass(frozen=True)
class FootprintEvent:
    """One operation of one process: what it changed, or what it reached."""

    pid: int
    op: str  # the audit event: one of protocol.FOOTPRINT_EVENTS ("open" only when it writes)
    # The absolute path it changes (its folder resolved); for socket.connect the address
    # ("host:port", "[host]:port", a Unix socket's path or "@name"), for socket.getaddrinfo the
    # name looked up.
    path: str
    # os.rename: the old name (changed too); os.link and os.symlink: what the new name points
    # at (not changed); else None.
    source: str | None
    t: float  # time.monotonic() in the process, before the operation

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> FootprintEvent:
        """The event of a ``footprint`` notice; a ``ValueError`` for an op that is not one."""
        op = message["ev"]
        if op not in FOOTPRINT_EVENTS:
            raise ValueError(
                f"unknown footprint op {op!r}; the child runtime reports"
                f" {', '.join(sorted(FOOTPRINT_EVENTS))}"
            )
        source = message.get("source")
        return cls(
            pid=int(message["pid"]),
            op=str(op),
            path=str(message["path"]),
            source=None if source is None else str(source),
            t=float(message["t"]),
        )

    @property
    def changed(self) -> tuple[str, ...]:
        """The paths this operation changes on disk (none for a connect or a lookup)."""
        if self.op in NETWORK_OPS:
            return ()
        if self.op == "os.rename" and self.source is not None:
            return (self.path, self.source)
        return (self.path,)

    @property
    def network(self) -> bool:
        """Whether this is a connect or a name lookup rather than a file operation."""
        return self.op in NETWORK_OPS
