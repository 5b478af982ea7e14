"""``port_taken(member=k, hold=1.0)``: the port member k is told is taken when k binds it.

The port is taken by another process between the moment k is told it and the moment k binds
it: the test process binds and listens on ``127.0.0.1:<port>`` before member k starts, and
gives the port back ``hold`` seconds after the fleet's release, counted in member k's own time
(``runtime/own_time.py``: on a busy machine the time k waits for a CPU does not shorten the
fault, up to ``MAX_STRETCH`` times ``hold`` in wall time). ``hold=None``: taken until the fleet
stops. Met when member k tried to bind the port (on 127.0.0.1, ``localhost`` or a wildcard
address) while the test process held it: each such bind is a ``PortHit``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.faults.port_base import (
    DEFAULT_HOLD,
    LOOPBACK_CONFLICTS,
    ArmedPortFault,
    PortHit,
    PortWatch,
    checked_hold,
    described_hold,
    described_miss,
    is_index,
)
from pytest_startup_guard.runtime.events import AccessEvent
from pytest_startup_guard.runtime.own_time import OwnClock


@dataclass(frozen=True)
class PortTaken:
    """``port_taken(member=k, hold=...)``: member k's port is taken until ``hold`` has passed."""

    member: int
    hold: float | None = DEFAULT_HOLD
    allow_miss: bool = False

    kind: ClassVar[str] = "port_taken"
    tells_port: ClassVar[bool] = True

    @property
    def involved(self) -> tuple[int, ...]:
        return (self.member,)

    def describe(self) -> str:
        hold = described_hold(self.hold)
        return f"port_taken(member={self.member}, hold={hold}{described_miss(self.allow_miss)})"

    def tell(self, ports: list[int | None]) -> None:
        """Member k is told its own port."""

    def arm(self, position: int, told: list[int | None], watch: PortWatch) -> ArmedPortTaken:
        port = told[self.member]
        assert port is not None, "a launch with port faults leases a port per member"
        return ArmedPortTaken(self, port, position, watch)


def port_taken(
    member: int, *, hold: float | None = DEFAULT_HOLD, allow_miss: bool = False
) -> PortTaken:
    """The port member ``member`` is told is taken (the test process listens on it) from before
    the member starts until ``hold`` seconds of the member's own time after the fleet's release
    (``None``: until the fleet stops). Unless ``allow_miss=True``, the launch fails if the
    member never tried to bind it while it was taken."""
    if not is_index(member):
        raise InvalidArgumentError(
            f"invalid member={member!r} for port_taken(): expected a member index (a whole"
            " number >= 0)"
        )
    hold = checked_hold(hold, "port_taken()")
    if not isinstance(allow_miss, bool):
        raise ArgumentTypeError(
            f"invalid allow_miss={allow_miss!r} for port_taken(): expected a bool"
        )
    return PortTaken(member, hold, allow_miss)


@dataclass(repr=False)
class ArmedPortTaken(ArmedPortFault):
    """A ``port_taken`` fault on one launch: the test process holds the port."""

    fault: PortTaken

    def on_armed(self) -> None:
        self.take()

    def on_release(self, t: float) -> None:
        """The hold counts from the release, in member k's own time."""
        members = self.watch.members
        if self.fault.hold is None or members is None:
            return
        pid = members.pid(self.fault.member)
        clock = OwnClock(pid, t) if pid is not None else None
        self.watch.give_back_later(self, self.fault.hold, clock, t)

    def settle(self) -> None:
        """Wait until it was met or gave its port back: a member may still bind after its probe
        said ready (at most ``MAX_STRETCH`` x the hold)."""
        if self.fault.hold is not None:
            while self.taken and not self.met and not self.watch.stopping.wait(0.01):
                pass

    def on_bind(self, event: AccessEvent, index: int) -> float | None:
        self.binds.append(event)
        if self.taken and event.host in LOOPBACK_CONFLICTS:
            self.hits.append(PortHit(event.pid, index, self.port, event.t, "the test process"))
        return None

    def why_missed(self) -> str:
        k, hold, released = self.fault.member, self.fault.hold, self.watch.released_t
        if hold is None:
            until = "until the fleet stops"
        elif self.released_t is not None and released is not None:
            until = f"until {self.released_t - released:.2f} s after the release"
        else:
            until = f"for {hold:g} s of member {k}'s own time after the release"
        return self.bind_miss(
            f"member {k} never tried to bind port {self.port} while it was taken (the test"
            f" process held it from before member {k} started {until})"
        )

    def member_cause(self, index: int) -> str | None:
        return f"port {self.port} was taken by the port_taken fault on member {index}"
