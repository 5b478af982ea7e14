"""``port_stolen(member=k, ...)``: the port member k picks itself is taken before it binds it.

- ``port_stolen(member=k, hold=1.0)``: a port member k picks itself is taken in the gap between
  its probe and its real bind. A probe is the close of a TCP socket that k's process tree bound
  to an internet address (port 0, or a scan from a base), reported by the child runtime after
  the close and before the close returns (``runtime/child/ports.py``): the test process takes
  the port then, before k can bind it again, in Python or in native code, and gives it back
  after ``hold`` seconds of the prober's own time (``None``: when the fleet stops). Only k's
  first probe is stolen.
- ``port_stolen(member=k, by=j)``: members k and j pick the same port (two scans from one base,
  vllm-project/vllm#43206). Whichever of the two probes first waits at its probe's close until
  the other one probed: k's first probe waits until one of j's probes returns the same port
  (or j's start-up is decided), then k goes on and binds it first, while j waits at its
  close until k's process tree listens on the port: j's own bind then meets it taken.

Met when the test process took the port right after k's probe, or when j's probe returned the
port k probed: the ``PortHit`` is that probe. A member that never probes is a miss.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from pytest_startup_guard.checks import flag, whole_number
from pytest_startup_guard.errors import InvalidArgumentError, StartupGuardError
from pytest_startup_guard.faults.port_base import (
    DEFAULT_HOLD,
    LOOPBACK_CONFLICTS,
    NEVER_MET,
    TAKER_HOST,
    ArmedPortFault,
    PortHit,
    PortProbe,
    PortWatch,
    checked_hold,
    described_hold,
    described_miss,
)
from pytest_startup_guard.runtime.events import AccessEvent, ProbeEvent
from pytest_startup_guard.runtime.own_time import OwnClock

# Seconds a probe's bind keeps the other member's bind of that port waiting, at most: a probe
# closes its socket microseconds after the bind; a bind that failed is never closed as a probe
# (the member's next bind replaces it), and this bounds what is left.
PROBE_BOUND = 2.0
BIND_WAIT = 0.003  # seconds a held bind sleeps before it asks again
PROBE_WAIT = 0.005  # seconds a held probe (port_stolen with by=) sleeps before it asks again


@dataclass(frozen=True)
class PortStolen:
    """``port_stolen(member=k, hold=..., by=None)``: the port member k probes is taken before k
    binds it (by the test process, or by member ``by``, whose probe returns the same port)."""

    member: int
    hold: float | None = DEFAULT_HOLD
    by: int | None = None
    allow_miss: bool = False

    kind: ClassVar[str] = "port_stolen"
    tells_port: ClassVar[bool] = False  # it faults a port the member picks

    @property
    def involved(self) -> tuple[int, ...]:
        return (self.member,) if self.by is None else (self.member, self.by)

    def describe(self) -> str:
        miss = described_miss(self.allow_miss)
        if self.by is not None:
            return f"port_stolen(member={self.member}, by={self.by}{miss})"
        return f"port_stolen(member={self.member}, hold={described_hold(self.hold)}{miss})"

    def tell(self, ports: list[int | None]) -> None:
        """Members are told their own ports: the fault is on the one they pick."""

    def arm(self, position: int, told: list[int | None], watch: PortWatch) -> ArmedPortStolen:
        return ArmedPortStolen(self, 0, position, watch)  # its port is the one it will probe


def port_stolen(
    member: int,
    *,
    hold: float | None = DEFAULT_HOLD,
    by: int | None = None,
    allow_miss: bool = False,
) -> PortStolen:
    """The port member ``member`` picks itself (its first probe: a TCP socket bound, its port
    read, the socket closed) is taken before the member binds it for real: by the test process,
    right after the probe's close, for ``hold`` seconds of the member's own time (``None``:
    until the fleet stops); or, with ``by=j``, by member j, whose probe is made to return the
    same port and which binds it second. Unless ``allow_miss=True``, the launch fails if that
    never happened (a member that never probes included)."""
    where = "port_stolen()"
    whole_number("member", member, where, meaning="a member index")
    if by is not None:
        whole_number("by", by, where, meaning="the index of another member, or None")
        if by == member:
            raise InvalidArgumentError(
                f"invalid by={by!r} for {where}: member {member} cannot collide with itself;"
                " expected the index of another member, or None (the test process takes it)"
            )
    return PortStolen(member, checked_hold(hold, where), by, flag("allow_miss", allow_miss, where))


@dataclass(repr=False)
class ArmedPortStolen(ArmedPortFault):
    """A ``port_stolen`` fault on one launch: it hears its members' probes."""

    fault: PortStolen

    hears_probes: ClassVar[bool] = True

    def hit_words(self, hit: PortHit) -> str:
        return f"its probe of port {hit.port} was taken by {hit.taken_by}"

    # -- binds and probes (the controller's thread, its lock held) -----------------------

    def hold_bind(self, event: AccessEvent, port: int) -> float | None:
        """``by=j`` before the collision: a member's bind of a port the other member has bound
        and not closed yet waits for that close. Otherwise two scans from one base could meet
        while both probe it (the second bind fails and moves on), and the ports the probes
        return would depend on timing."""
        fault, watch = self.fault, self.watch
        if fault.by is None or self.met:
            return None
        index = watch.index_of(event, self.members)
        members = watch.members
        if index is None or members is None:
            return None
        other = fault.by if index == fault.member else fault.member
        bound = self.bound.get(other)
        if (
            bound is not None
            and bound[0] == port
            and time.monotonic() - bound[1] < PROBE_BOUND
            and not watch.stopping.is_set()
            and not members.settled(other)
        ):
            return BIND_WAIT
        self.bound[index] = (port, time.monotonic())
        return None

    def on_probe(self, event: ProbeEvent, index: int) -> float | None:
        """A member closed a socket it had bound to a port: take the port now, or hold the
        member until the collision it models has happened."""
        if not event.again:
            self.probes.append(PortProbe(event.pid, index, event.host, event.port, event.t))
            if self.bound.get(index, (0, 0.0))[0] == event.port:
                del self.bound[index]  # closed: the other member may bind it now
        if self.watch.stopping.is_set():
            return None
        if self.fault.by is None:
            self._steal(index, event)
            return None
        if index == self.fault.member:
            return self._first_probe(event)
        return self._second_probe(event)

    def _steal(self, index: int, event: ProbeEvent) -> None:
        """Take the port of member k's first probe, before its close returns."""
        if len(self.probes) != 1 or event.again:
            return  # only the first probe is stolen
        self.port = event.port
        try:
            self.take(TAKER_HOST if event.host in LOOPBACK_CONFLICTS else event.host)
        except StartupGuardError as error:
            self.take_error = str(error)
            return
        assert self.taken_t is not None
        self.hits.append(PortHit(event.pid, index, event.port, self.taken_t, "the test process"))
        if self.fault.hold is not None:
            clock = OwnClock(event.pid, self.taken_t)
            self.watch.give_back_later(self, self.fault.hold, clock, self.taken_t)

    def _first_probe(self, event: ProbeEvent) -> float:
        """Member k's probe (``by=j``): the collision happens when j probed the same port; k's
        first probe waits for that (or for j's start-up to be decided), then binds first."""
        members = self.watch.members
        assert members is not None and self.fault.by is not None
        k, j, port = self.fault.member, self.fault.by, event.port
        if self.met:
            return 0.0
        if self.held.get(j) == port:  # j probed this port first and waits for k's probe
            del self.held[j]
            self._collided(port)
            return 0.0
        first = len(self.probed(k)) == 1
        if (event.again and k not in self.held) or not first or members.settled(j):
            self.held.pop(k, None)
            return 0.0
        self.held.pop(j, None)  # j's waiting probe is not k's port: j goes on, k waits for more
        self.held[k] = port
        return PROBE_WAIT

    def _second_probe(self, event: ProbeEvent) -> float:
        """Member j's probe (``by=j``): once it returned k's port, it waits until k's tree
        listens there; before k probed at all, it waits for k's first probe."""
        members = self.watch.members
        assert members is not None and self.fault.by is not None
        k, j, port = self.fault.member, self.fault.by, event.port
        if not self.met and self.held.get(k) == port:  # the collision
            del self.held[k]
            self._collided(port)
        if self.met:
            waits = port == self.port and not members.settled(k)
            if waits and not self.watch.listens(k, port, max_age=PROBE_WAIT):  # fresh: it waits
                return PROBE_WAIT
            return 0.0
        if event.again:
            return PROBE_WAIT if j in self.held and not members.settled(k) else 0.0
        if k not in self.held and not self.probed(k) and not members.settled(k):
            self.held[j] = port  # k has not probed yet: j's port stays free until it does
            return PROBE_WAIT
        return 0.0

    def _collided(self, port: int) -> None:
        """k's and j's probes returned one port: the fault is met (a hit of j's probe)."""
        fault = self.fault
        assert fault.by is not None
        self.port = port
        k_probe = next(p for p in self.probes if p.member == fault.member and p.port == port)
        j_probe = next(p for p in self.probes if p.member == fault.by and p.port == port)
        taken_by = f"member {fault.member} (pid {k_probe.pid})"
        self.hits.append(PortHit(j_probe.pid, fault.by, port, j_probe.t, taken_by))

    # -- what it comes to ----------------------------------------------------------------

    def met_words(self) -> str:
        hit = self.hits[0]
        binds = f"; {len(self.binds)} bind(s) of it seen since" if self.binds else ""
        if self.fault.by is None:
            return (
                f"member {hit.member}'s probe of port {hit.port} (pid {hit.pid}) was taken by the"
                f" test process{binds}"
            )
        return (
            f"member {hit.member}'s probe (pid {hit.pid}) returned port {hit.port}, which"
            f" {hit.taken_by} had probed{binds}"
        )

    def why_missed(self) -> str:
        k, j = self.fault.member, self.fault.by
        never = [index for index in self.members if not self.probed(index)]
        if never:
            why = " and ".join(
                f"member {index} never probed a port (no TCP socket its processes bound to an"
                " internet address was closed)"
                for index in never
            )
        elif j is None:
            why = f"member {k} probed port {self.probed(k)[0]}, but " + (
                f"the test process could not take it: {self.take_error}"
                if self.take_error
                else "the fleet had stopped"
            )
        else:
            why = (
                f"member {j}'s probes never returned a port member {k} probed (member {k}"
                f" probed {_ports(self.probed(k))}; member {j} probed {_ports(self.probed(j))})"
            )
        return (
            f"port fault {self.fault.describe()} never met: {why} ({self.binds_seen()})."
            f" {NEVER_MET}; a member probes a port by binding a TCP socket (port 0, or a scan),"
            " reading its port and closing it, in Python. If the server may legitimately not"
            f" probe, pass allow_miss=True to {self.kind}()."
        )

    def member_cause(self, index: int) -> str | None:
        if not self.met:
            return None
        fault, k = self.fault, self.fault.member
        if fault.by is None:
            return (
                f"port {self.port}, which member {k} picked itself, was taken right after its"
                f" probe by the {fault.describe()} fault (EADDRINUSE)"
            )
        if index == fault.by:
            return (
                f"member {index} picked port {self.port}, which member {k} had picked too"
                f" ({fault.describe()}): member {k} bound it first (EADDRINUSE)"
            )
        return (
            f"member {index} picked port {self.port}, as member {fault.by} did ({fault.describe()})"
        )


def _ports(ports: list[int]) -> str:
    return "port " + ", ".join(map(str, ports)) if ports else "no port"
