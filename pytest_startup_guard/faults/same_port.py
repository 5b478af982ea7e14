"""``same_port(members=(i, j))``: member j is told member i's port; i binds it first.

j's binds of that port wait until i's process tree listens on it (or i's start-up is decided
otherwise): i binds first, j second, in every run. Met when a member tried to bind the port
(on 127.0.0.1, ``localhost`` or a wildcard address) while the other member's process tree was
seen listening on it: each such bind is a ``PortHit``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.faults.port_base import (
    LOOPBACK_CONFLICTS,
    ArmedPortFault,
    PortHit,
    PortWatch,
    described_miss,
    is_index,
)
from pytest_startup_guard.runtime.events import AccessEvent

BIND_WAIT = 0.003  # seconds a held bind (the second member's) sleeps before it asks again


@dataclass(frozen=True)
class SamePort:
    """``same_port(members=(i, j))``: member j is told member i's port; i binds it first."""

    members: tuple[int, int]
    allow_miss: bool = False

    kind: ClassVar[str] = "same_port"
    tells_port: ClassVar[bool] = True

    @property
    def involved(self) -> tuple[int, ...]:
        return self.members

    def describe(self) -> str:
        first, second = self.members
        return f"same_port(members=({first}, {second}){described_miss(self.allow_miss)})"

    def tell(self, ports: list[int | None]) -> None:
        """The second member is told the first one's port."""
        first, second = self.members
        ports[second] = ports[first]

    def arm(self, position: int, told: list[int | None], watch: PortWatch) -> ArmedSamePort:
        port = told[self.members[0]]
        assert port is not None, "a launch with port faults leases a port per member"
        return ArmedSamePort(self, port, position, watch)


def same_port(members: tuple[int, int], *, allow_miss: bool = False) -> SamePort:
    """Member ``members[1]`` is told the port of member ``members[0]``, which binds it first.
    Unless ``allow_miss=True``, the launch fails if neither tried to bind it while the other
    listened on it."""
    pair = tuple(members) if isinstance(members, (tuple, list)) else None
    if pair is None or len(pair) != 2 or not all(map(is_index, pair)) or pair[0] == pair[1]:
        raise InvalidArgumentError(
            f"invalid members={members!r} for same_port(): expected two distinct member"
            " indexes, such as (0, 1)"
        )
    if not isinstance(allow_miss, bool):
        raise ArgumentTypeError(
            f"invalid allow_miss={allow_miss!r} for same_port(): expected a bool"
        )
    return SamePort((pair[0], pair[1]), allow_miss)


@dataclass(repr=False)
class ArmedSamePort(ArmedPortFault):
    """A ``same_port`` fault on one launch: the second member's bind waits for the first."""

    fault: SamePort

    def on_bind(self, event: AccessEvent, index: int) -> float | None:
        watch = self.watch
        members = watch.members
        assert members is not None
        first, second = self.fault.members
        other = first if index == second else second
        if (
            index == second
            and not watch.stopping.is_set()
            and not members.settled(first)
            and not watch.listens(first, self.port, max_age=BIND_WAIT)  # fresh: it waits on it
        ):
            return BIND_WAIT  # the first member has not bound it yet: ask again soon
        self.binds.append(event)
        if event.host in LOOPBACK_CONFLICTS and watch.listens(other, self.port, max_age=0.0):
            # the other member's sockets are read now: a hit must be true
            taken_by = f"member {other} (pid {members.pid(other)})"
            self.hits.append(PortHit(event.pid, index, self.port, event.t, taken_by))
        return None

    def why_missed(self) -> str:
        first, second = self.fault.members
        return self.bind_miss(
            f"neither member {first} nor member {second} tried to bind port {self.port} while"
            " the other one listened on it"
        )

    def member_cause(self, index: int) -> str | None:
        first, second = self.fault.members
        other = first if index == second else second
        return f"member {index} was told the same port {self.port} as member {other} (same_port)"
