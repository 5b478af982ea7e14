"""Port faults: the port a fleet member was told is not free when the member binds it.

- ``port_taken(member=k, hold=1.0)``: the port member k is told is taken by another process
  between the moment k is told it and the moment k binds it. The test process binds and
  listens on ``127.0.0.1:<port>`` before member k starts, and gives the port back ``hold``
  seconds after the fleet's release, counted in member k's own time (``runtime/own_time.py``:
  on a busy machine the time k waits for a CPU does not shorten the fault, up to
  ``MAX_STRETCH`` times ``hold`` in wall time). ``hold=None``: taken until the fleet stops.
- ``same_port(members=(i, j))``: member j is told member i's port. j's binds of that port wait
  until i's process tree listens on it (or i's start-up is decided otherwise): i binds first,
  j second, in every run.
- ``port_stolen(member=k, hold=1.0)``: a port member k picks itself is taken in the gap between
  its probe and its real bind. A probe is the close of a TCP socket that k's process tree bound
  to an internet address (port 0, or a scan from a base), reported by the child runtime after
  the close and before the close returns (``runtime/child_ports.py``): the test process takes
  the port then, before k can bind it again, in Python or in native code, and gives it back
  after ``hold`` seconds of the prober's own time (``None``: when the fleet stops). Only k's
  first probe is stolen.
- ``port_stolen(member=k, by=j)``: members k and j pick the same port (two scans from one base,
  vllm-project/vllm#43206). Whichever of the two probes first waits at its probe's close until
  the other one probed: k's first probe waits until one of j's probes returns the same port
  (or j's start-up is decided), then k goes on and binds it first, while j waits at its
  close until k's process tree listens on the port: j's own bind then meets it taken.

Never vacuous: the members of a launch with port faults report each bind of an internet
address through the child runtime (``socket.bind`` events, before the bind happens). A fault is
met when a member it involves tried to bind the faulted port (on 127.0.0.1, ``localhost`` or a
wildcard address) while it was taken: by the test process (``port_taken``), or by the other
member's process tree, seen listening on it (``same_port``). Each such bind is a ``PortHit``.
``port_stolen`` is met when the test process took the port right after k's probe, or when j's
probe returned the port k probed: the ``PortHit`` is that probe. A fault never met fails the
launch unless ``allow_miss=True``; ``port_stolen`` on a member that never probes is such a miss.

A member in a port fault may end up serving on another port than the one it was told. Its
readiness is then probed only on a port its own process tree listens on, never through the
taker's or the other member's socket (``own_port``).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from pytest_startup_guard.checks import flag, whole_number
from pytest_startup_guard.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    StartupGuardError,
)
from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    AccessEvent,
    ProbeEvent,
    RuntimeListener,
)
from pytest_startup_guard.runtime.own_time import MAX_STRETCH, OwnClock

DEFAULT_HOLD = 1.0
TAKER_HOST = "127.0.0.1"
PORTS_MAX_AGE = 0.05  # seconds: how long a member's listening ports, once read, count as current
# Seconds a probe's bind keeps the other member's bind of that port waiting, at most: a probe
# closes its socket microseconds after the bind; a bind that failed is never closed as a probe
# (the member's next bind replaces it), and this bounds what is left.
PROBE_BOUND = 2.0
BIND_WAIT = 0.003  # seconds a held bind (same_port's second member) sleeps before it asks again
PROBE_WAIT = 0.005  # seconds a held probe (port_stolen with by=) sleeps before it asks again
SHOWN_BINDS = 6  # binds of a member listed in a miss message
# Addresses whose bind of a port conflicts with a socket listening on 127.0.0.1 (Linux: the
# wildcards do; "::" as long as it is dual-stack, the default). A bind of another address
# (127.0.0.2, ::1, a real interface) is recorded, and never counts as meeting a fault.
LOOPBACK_CONFLICTS = frozenset({"127.0.0.1", "localhost", "", "0.0.0.0", "::", "::ffff:127.0.0.1"})
WHERE = "server_fleet.launch()"
FAULTS_ACCEPTED = (
    "port_taken(member=k) or same_port(members=(i, j)) or port_stolen(member=k), or a fault"
    " on what processes do: fs_error(...), network_fs(...), lock_not_exclusive(...),"
    " interleave(...), listen_late(...)"
)


def _is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class PortTaken:
    """``port_taken(member=k, hold=...)``: member k's port is taken until ``hold`` has passed."""

    member: int
    hold: float | None = DEFAULT_HOLD
    allow_miss: bool = False

    kind: ClassVar[str] = "port_taken"

    @property
    def involved(self) -> tuple[int, ...]:
        return (self.member,)

    def describe(self) -> str:
        hold = "None" if self.hold is None else f"{self.hold:g}"
        miss = ", allow_miss=True" if self.allow_miss else ""
        return f"port_taken(member={self.member}, hold={hold}{miss})"


@dataclass(frozen=True)
class SamePort:
    """``same_port(members=(i, j))``: member j is told member i's port; i binds it first."""

    members: tuple[int, int]
    allow_miss: bool = False

    kind: ClassVar[str] = "same_port"

    @property
    def involved(self) -> tuple[int, ...]:
        return self.members

    def describe(self) -> str:
        miss = ", allow_miss=True" if self.allow_miss else ""
        return f"same_port(members=({self.members[0]}, {self.members[1]}){miss})"


@dataclass(frozen=True)
class PortStolen:
    """``port_stolen(member=k, hold=..., by=None)``: the port member k probes is taken before k
    binds it (by the test process, or by member ``by``, whose probe returns the same port)."""

    member: int
    hold: float | None = DEFAULT_HOLD
    by: int | None = None
    allow_miss: bool = False

    kind: ClassVar[str] = "port_stolen"

    @property
    def involved(self) -> tuple[int, ...]:
        return (self.member,) if self.by is None else (self.member, self.by)

    def describe(self) -> str:
        miss = ", allow_miss=True" if self.allow_miss else ""
        if self.by is not None:
            return f"port_stolen(member={self.member}, by={self.by}{miss})"
        hold = "None" if self.hold is None else f"{self.hold:g}"
        return f"port_stolen(member={self.member}, hold={hold}{miss})"


PortFault = PortTaken | SamePort | PortStolen


def port_taken(
    member: int, *, hold: float | None = DEFAULT_HOLD, allow_miss: bool = False
) -> PortTaken:
    """The port member ``member`` is told is taken (the test process listens on it) from before
    the member starts until ``hold`` seconds of the member's own time after the fleet's release
    (``None``: until the fleet stops). Unless ``allow_miss=True``, the launch fails if the
    member never tried to bind it while it was taken."""
    if not _is_index(member):
        raise InvalidArgumentError(
            f"invalid member={member!r} for port_taken(): expected a member index (a whole"
            " number >= 0)"
        )
    hold = _checked_hold(hold, "port_taken()")
    if not isinstance(allow_miss, bool):
        raise ArgumentTypeError(
            f"invalid allow_miss={allow_miss!r} for port_taken(): expected a bool"
        )
    return PortTaken(member, hold, allow_miss)


def _checked_hold(hold: object, where: str) -> float | None:
    """``hold`` as seconds > 0, or None (until the fleet stops)."""
    if hold is None:
        return None
    if (
        isinstance(hold, bool)
        or not isinstance(hold, (int, float))
        or not math.isfinite(hold)
        or hold <= 0
    ):
        raise InvalidArgumentError(
            f"invalid hold={hold!r} for {where}: expected seconds > 0, or None (taken until the"
            " fleet stops)"
        )
    return float(hold)


def same_port(members: tuple[int, int], *, allow_miss: bool = False) -> SamePort:
    """Member ``members[1]`` is told the port of member ``members[0]``, which binds it first.
    Unless ``allow_miss=True``, the launch fails if neither tried to bind it while the other
    listened on it."""
    pair = tuple(members) if isinstance(members, (tuple, list)) else None
    if pair is None or len(pair) != 2 or not all(map(_is_index, pair)) or pair[0] == pair[1]:
        raise InvalidArgumentError(
            f"invalid members={members!r} for same_port(): expected two distinct member"
            " indexes, such as (0, 1)"
        )
    if not isinstance(allow_miss, bool):
        raise ArgumentTypeError(
            f"invalid allow_miss={allow_miss!r} for same_port(): expected a bool"
        )
    return SamePort((pair[0], pair[1]), allow_miss)


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
    return PortStolen(member, _checked_hold(hold, where), by, flag("allow_miss", allow_miss, where))


@dataclass(frozen=True)
class PortHit:
    """A member's bind of its faulted port while the port was taken; for ``port_stolen``, the
    member's probe whose port was taken (by the test process, or by the other member's probe)."""

    pid: int  # the process that bound (port_stolen: that probed)
    member: int  # the index of its member
    port: int
    t: float  # time.monotonic() when the bind was reported, right before it happened
    taken_by: str  # "the test process", or "member 0 (pid 1234)"


@dataclass(frozen=True)
class PortProbe:
    """A probe of a member in a ``port_stolen`` fault: the port it picked, closed at ``t``."""

    pid: int
    member: int
    host: str
    port: int
    t: float


@dataclass
class ArmedPortFault:
    """One port fault of one launch: its port, and what met it."""

    fault: PortFault
    port: int
    position: int  # its index in ``faults=``
    hits: list[PortHit] = field(default_factory=list)
    binds: list[AccessEvent] = field(default_factory=list)  # binds of the port by its members
    taken_t: float | None = None  # port_taken: when the test process took the port
    released_t: float | None = None  # port_taken: when it gave the port back
    probes: list[PortProbe] = field(default_factory=list)  # port_stolen: its members' probes
    take_error: str | None = None  # port_stolen: why the probed port could not be taken
    # port_stolen with by=: member -> the port whose probe it waits at, until the other probes
    held: dict[int, int] = field(default_factory=dict, repr=False)
    # port_stolen with by=: member -> (the port a socket of it is bound to and not closed yet,
    # when it was bound)
    bound: dict[int, tuple[int, float]] = field(default_factory=dict, repr=False)
    _taker: socket.socket | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return self.fault.kind

    @property
    def members(self) -> tuple[int, ...]:
        return self.fault.involved

    @property
    def allow_miss(self) -> bool:
        return self.fault.allow_miss

    @property
    def met(self) -> bool:
        """Whether a member really tried to bind the port while it was taken."""
        return bool(self.hits)

    @property
    def taken(self) -> bool:
        """port_taken: whether the test process holds the port now."""
        return self._taker is not None

    def describe(self) -> str:
        if not self.port:
            return f"{self.fault.describe()} (no port probed)"
        return f"{self.fault.describe()} on port {self.port}"

    def __repr__(self) -> str:
        return f"<ArmedPortFault {self.describe()}: {len(self.hits)} hits>"

    def probed(self, index: int) -> list[int]:
        """The ports member ``index`` probed, in order (port_stolen)."""
        return [probe.port for probe in self.probes if probe.member == index]

    def take(self, host: str = TAKER_HOST) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        taker = socket.socket(family, socket.SOCK_STREAM)
        try:
            taker.bind((host, self.port))
            taker.listen(1)
        except OSError as error:
            taker.close()
            raise StartupGuardError(
                f"{self.fault.describe()} (faults[{self.position}] of {WHERE}) could not take"
                f" port {self.port} on {host}: {error}"
            ) from None
        self._taker, self.taken_t = taker, time.monotonic()

    def give_back(self) -> None:
        taker, self._taker = self._taker, None
        if taker is not None:
            taker.close()
            self.released_t = time.monotonic()


class Members(Protocol):
    """What the port faults need to know about the members of their launch."""

    def label(self, index: int) -> str | None:
        """Its child-runtime member label; None before it started."""

    def pid(self, index: int) -> int | None: ...

    def tree(self, index: int) -> set[int]:
        """Every process of its tree as far as known now (empty before it started)."""

    def settled(self, index: int) -> bool:
        """Whether its start-up has been decided (ready, exited, hung, ...)."""

    def status(self, index: int) -> str:
        """What became of it, in a few words, for messages."""


class _BindListener(RuntimeListener):
    """What a launch's port faults hear from the child runtime: the members' binds."""

    def __init__(self, faults: PortFaults) -> None:
        self.faults = faults

    def on_bind(self, event: AccessEvent) -> float | None:
        return self.faults.on_bind(event)

    def on_probe(self, event: ProbeEvent) -> float | None:
        return self.faults.on_probe(event)


class PortFaults:
    """The port faults of one launch: checked, armed before the members start, given back
    when the fleet stops."""

    def __init__(
        self, faults: object, *, count: int, needs_port: bool, ready_label: str = ""
    ) -> None:
        self.faults = _checked(faults, count, needs_port, ready_label)
        self.armed: list[ArmedPortFault] = []
        self.released_t: float | None = None
        self.python = True  # the members run Python: they report their binds
        self._controller: RuntimeController | None = None
        self._members: Members | None = None
        self._seen: dict[int, tuple[float, set[int] | None]] = {}
        self._seen_lock = threading.Lock()
        self._closed = threading.Event()
        self._listener = _BindListener(self)

    def __bool__(self) -> bool:
        return bool(self.faults)

    def involves(self, index: int) -> bool:
        """Whether member ``index``'s own port (the one it is told) is faulted: it is then
        probed for readiness only where its own tree listens (``port_stolen`` leaves it be)."""
        return any(
            index in fault.involved for fault in self.faults if not isinstance(fault, PortStolen)
        )

    def fault_of(self, index: int) -> ArmedPortFault | None:
        for armed in self.armed:
            if index in armed.members:
                return armed
        return None

    def told_ports(self, leased: list[int | None]) -> list[int | None]:
        """The port each member is told: its lease's, but same_port's second member is told
        the first one's."""
        ports = list(leased)
        for fault in self.faults:
            if isinstance(fault, SamePort):
                first, second = fault.members
                ports[second] = ports[first]
        return ports

    # -- the life of a launch ------------------------------------------------------------

    def arm(
        self,
        controller: RuntimeController,
        told: list[int | None],
        members: Members,
        *,
        python: bool,
    ) -> None:
        """Take the ports of ``port_taken`` faults and have binds reported: before any member
        starts."""
        if not self.faults:
            return
        self._controller, self._members, self.python = controller, members, python
        for position, fault in enumerate(self.faults):
            if isinstance(fault, PortStolen):  # its port is the one it will probe
                self.armed.append(ArmedPortFault(fault, 0, position))
                continue
            port = told[fault.involved[0]]
            assert port is not None, "a launch with port faults leases a port per member"
            self.armed.append(ArmedPortFault(fault, port, position))
        for armed in self.armed:
            if isinstance(armed.fault, PortTaken):
                armed.take()
        controller.report_binds()
        if any(isinstance(fault, PortStolen) for fault in self.faults):
            controller.report_probes()
        controller.subscribe(self._listener)

    def released(self, t: float) -> None:
        """The fleet was released at ``t``: the holds of ``port_taken`` faults count from now."""
        self.released_t = t
        members = self._members
        for armed in self.armed:
            fault = armed.fault
            if not isinstance(fault, PortTaken) or fault.hold is None or members is None:
                continue
            pid = members.pid(fault.member)
            clock = OwnClock(pid, t) if pid is not None else None
            threading.Thread(
                target=self._give_back_after,
                args=(armed, fault.hold, clock, t),
                name=f"startup-guard-{fault.kind}-{armed.port}",
                daemon=True,
            ).start()

    def _give_back_after(
        self, armed: ArmedPortFault, hold: float, clock: OwnClock | None, started: float
    ) -> None:
        """Give the port back once member k has had ``hold`` seconds of its own time since the
        release (or ``MAX_STRETCH`` x ``hold`` in wall time passed), or the fleet stopped."""
        while True:
            now = time.monotonic()
            own = clock.own(now) if clock is not None else now - started
            if own >= hold or now - started >= hold * MAX_STRETCH:
                break
            if self._closed.wait(max(0.001, min(hold - own, 0.02))):
                break
        self._give_back(armed)

    def _give_back(self, armed: ArmedPortFault) -> None:
        if self._controller is None:
            armed.give_back()
            return
        with self._controller.lock:  # never while a bind of the port is being judged
            armed.give_back()

    def settle(self) -> None:
        """Wait until each ``port_taken`` fault with a hold was met or gave its port back: a
        member may still bind after its probe said ready (at most ``MAX_STRETCH`` x the hold)."""
        for armed in self.armed:
            if isinstance(armed.fault, PortTaken) and armed.fault.hold is not None:
                while armed.taken and not armed.met and not self._closed.wait(0.01):
                    pass

    def close(self) -> None:
        """Give every taken port back and stop listening for binds (the fleet stops)."""
        self._closed.set()
        for armed in self.armed:
            self._give_back(armed)
        if self._controller is not None:
            self._controller.unsubscribe(self._listener)

    # -- binds (the controller's thread, its lock held) ---------------------------------

    def on_bind(self, event: AccessEvent) -> float | None:
        """A member's bind: held while its port is taken, recorded as a fault met."""
        port = event.port
        if not port:
            return None
        wait = self._probe_bind(event, port)
        if wait:
            return wait
        for armed in self.armed:
            if armed.port != port:
                continue
            index = self._index_of(event, armed.members)
            if index is None:
                continue
            if isinstance(armed.fault, (PortTaken, PortStolen)):
                armed.binds.append(event)
                taken = isinstance(armed.fault, PortTaken) and armed.taken
                if taken and event.host in LOOPBACK_CONFLICTS:
                    armed.hits.append(PortHit(event.pid, index, port, event.t, "the test process"))
                return None
            return self._same_port_bind(armed, armed.fault, index, event)
        return None

    def _probe_bind(self, event: AccessEvent, port: int) -> float | None:
        """``port_stolen(by=j)`` before the collision: a member's bind of a port the other
        member has bound and not closed yet waits for that close. Otherwise two scans from one
        base could meet while both probe it (the second bind fails and moves on), and the ports
        the probes return would depend on timing."""
        members = self._members
        for armed in self.armed:
            fault = armed.fault
            if not isinstance(fault, PortStolen) or fault.by is None or armed.met:
                continue
            index = self._index_of(event, armed.members)
            if index is None or members is None:
                continue
            other = fault.by if index == fault.member else fault.member
            bound = armed.bound.get(other)
            if (
                bound is not None
                and bound[0] == port
                and time.monotonic() - bound[1] < PROBE_BOUND
                and not self._closed.is_set()
                and not members.settled(other)
            ):
                return BIND_WAIT
            armed.bound[index] = (port, time.monotonic())
        return None

    def _same_port_bind(
        self, armed: ArmedPortFault, fault: SamePort, index: int, event: AccessEvent
    ) -> float | None:
        members = self._members
        assert members is not None
        first, second = fault.members
        other = first if index == second else second
        if (
            index == second
            and not self._closed.is_set()
            and not members.settled(first)
            and not self.listens(first, armed.port, max_age=BIND_WAIT)  # fresh: it waits on it
        ):
            return BIND_WAIT  # the first member has not bound it yet: ask again soon
        armed.binds.append(event)
        if event.host in LOOPBACK_CONFLICTS and self.listens(other, armed.port, max_age=0.0):
            # the other member's sockets are read now: a hit must be true
            taken_by = f"member {other} (pid {members.pid(other)})"
            armed.hits.append(PortHit(event.pid, index, armed.port, event.t, taken_by))
        return None

    # -- probes (the controller's thread, its lock held) ---------------------------------

    def on_probe(self, event: ProbeEvent) -> float | None:
        """A member closed a socket it had bound to a port: ``port_stolen`` takes the port now,
        or holds the member until the collision it models has happened."""
        for armed in self.armed:
            fault = armed.fault
            if not isinstance(fault, PortStolen):
                continue
            index = self._index_of(event, armed.members)
            if index is None:
                continue
            if not event.again:
                armed.probes.append(PortProbe(event.pid, index, event.host, event.port, event.t))
                if armed.bound.get(index, (0, 0.0))[0] == event.port:
                    del armed.bound[index]  # closed: the other member may bind it now
            if self._closed.is_set():
                return None
            if fault.by is None:
                self._steal(armed, fault, index, event)
                return None
            if index == fault.member:
                return self._first_probe(armed, fault, event)
            return self._second_probe(armed, fault, event)
        return None

    def _steal(
        self, armed: ArmedPortFault, fault: PortStolen, index: int, event: ProbeEvent
    ) -> None:
        """Take the port of member k's first probe, before its close returns."""
        if len(armed.probes) != 1 or event.again:
            return  # only the first probe is stolen
        armed.port = event.port
        try:
            armed.take(TAKER_HOST if event.host in LOOPBACK_CONFLICTS else event.host)
        except StartupGuardError as error:
            armed.take_error = str(error)
            return
        assert armed.taken_t is not None
        armed.hits.append(PortHit(event.pid, index, event.port, armed.taken_t, "the test process"))
        if fault.hold is not None:
            threading.Thread(
                target=self._give_back_after,
                args=(armed, fault.hold, OwnClock(event.pid, armed.taken_t), armed.taken_t),
                name=f"startup-guard-{fault.kind}-{armed.port}",
                daemon=True,
            ).start()

    def _first_probe(self, armed: ArmedPortFault, fault: PortStolen, event: ProbeEvent) -> float:
        """Member k's probe (``by=j``): the collision happens when j probed the same port; k's
        first probe waits for that (or for j's start-up to be decided), then binds first."""
        members = self._members
        assert members is not None and fault.by is not None
        k, j, port = fault.member, fault.by, event.port
        if armed.met:
            return 0.0
        if armed.held.get(j) == port:  # j probed this port first and waits for k's probe
            del armed.held[j]
            self._collided(armed, fault, port)
            return 0.0
        first = len(armed.probed(k)) == 1
        if (event.again and k not in armed.held) or not first or members.settled(j):
            armed.held.pop(k, None)
            return 0.0
        armed.held.pop(j, None)  # j's waiting probe is not k's port: j goes on, k waits for more
        armed.held[k] = port
        return PROBE_WAIT

    def _second_probe(self, armed: ArmedPortFault, fault: PortStolen, event: ProbeEvent) -> float:
        """Member j's probe (``by=j``): once it returned k's port, it waits until k's tree
        listens there; before k probed at all, it waits for k's first probe."""
        members = self._members
        assert members is not None and fault.by is not None
        k, j, port = fault.member, fault.by, event.port
        if not armed.met and armed.held.get(k) == port:  # the collision
            del armed.held[k]
            self._collided(armed, fault, port)
        if armed.met:
            waits = port == armed.port and not members.settled(k)
            if waits and not self.listens(k, port, max_age=PROBE_WAIT):  # fresh: it waits on it
                return PROBE_WAIT
            return 0.0
        if event.again:
            return PROBE_WAIT if j in armed.held and not members.settled(k) else 0.0
        if k not in armed.held and not armed.probed(k) and not members.settled(k):
            armed.held[j] = port  # k has not probed yet: j's port stays free until it does
            return PROBE_WAIT
        return 0.0

    def _collided(self, armed: ArmedPortFault, fault: PortStolen, port: int) -> None:
        """k's and j's probes returned one port: the fault is met (a hit of j's probe)."""
        assert fault.by is not None
        armed.port = port
        k_probe = next(p for p in armed.probes if p.member == fault.member and p.port == port)
        j_probe = next(p for p in armed.probes if p.member == fault.by and p.port == port)
        taken_by = f"member {fault.member} (pid {k_probe.pid})"
        armed.hits.append(PortHit(j_probe.pid, fault.by, port, j_probe.t, taken_by))

    def _index_of(self, event: AccessEvent | ProbeEvent, indexes: Iterable[int]) -> int | None:
        """Which of the members ``indexes`` the binding process belongs to, if any."""
        members = self._members
        if members is None:
            return None
        indexes = list(indexes)
        for index in indexes:
            if event.member is not None and event.member == members.label(index):
                return index
        if event.member is None:  # a descendant that lost its label: look at the trees
            for index in indexes:
                if event.pid in members.tree(index):
                    return index
        return None

    # -- where members listen ------------------------------------------------------------

    def ports_of(self, index: int, max_age: float = PORTS_MAX_AGE) -> set[int] | None:
        """The TCP ports member ``index``'s tree listens on (read at most ``max_age`` s ago);
        None where its sockets cannot be read."""
        now = time.monotonic()
        with self._seen_lock:
            seen = self._seen.get(index)
        if seen is not None and now - seen[0] <= max_age:
            return seen[1]
        members = self._members
        ports = listening_ports(members.tree(index)) if members is not None else None
        with self._seen_lock:
            self._seen[index] = (time.monotonic(), ports)
        return ports

    def listens(self, index: int, port: int, max_age: float = PORTS_MAX_AGE) -> bool:
        ports = self.ports_of(index, max_age)
        return ports is not None and port in ports

    def own_port(self, index: int) -> tuple[int | None, bool]:
        """The port to probe member ``index``'s readiness on, and whether its own tree was seen
        listening there. ``(None, False)``: not yet (it listens on nothing, or only the fault
        holds its port). The port it was told if it listens there, else the (lowest) port it
        listens on; where its sockets cannot be read, the port it was told, unchecked."""
        armed = self.fault_of(index)
        if armed is None:
            return None, False
        ports = self.ports_of(index)
        if ports is None:
            if armed.taken:
                return None, False  # the only socket on it is the test process's
            return armed.port, False
        if armed.port in ports:
            return armed.port, True
        if ports:
            return min(ports), True
        return None, False

    # -- what it comes to ----------------------------------------------------------------

    def cause(self, index: int) -> str | None:
        """Why member ``index`` could not bind its port, naming its fault."""
        armed = self.fault_of(index)
        if armed is None:
            return None
        if isinstance(armed.fault, PortTaken):
            return f"port {armed.port} was taken by the port_taken fault on member {index}"
        if isinstance(armed.fault, PortStolen):
            return self._stolen_cause(armed, armed.fault, index)
        first, second = armed.fault.members
        other = first if index == second else second
        return f"member {index} was told the same port {armed.port} as member {other} (same_port)"

    def _stolen_cause(self, armed: ArmedPortFault, fault: PortStolen, index: int) -> str | None:
        if not armed.met:
            return None
        k = fault.member
        if fault.by is None:
            return (
                f"port {armed.port}, which member {k} picked itself, was taken right after its"
                f" probe by the {fault.describe()} fault (EADDRINUSE)"
            )
        if index == fault.by:
            return (
                f"member {index} picked port {armed.port}, which member {k} had picked too"
                f" ({fault.describe()}): member {k} bound it first (EADDRINUSE)"
            )
        return f"member {index} picked port {armed.port}, as member {fault.by} did ({fault.describe()})"

    def lines(self) -> list[str]:
        """One line per fault: met or not, and by what, for a fleet's summary."""
        lines = []
        for armed in self.armed:
            if armed.met and isinstance(armed.fault, PortStolen):
                state = "met: " + self._stolen_line(armed, armed.fault)
            elif armed.met:
                by = sorted({hit.taken_by for hit in armed.hits})
                who = sorted({hit.member for hit in armed.hits})
                state = (
                    f"met: {len(armed.hits)} bind(s) by member {', '.join(map(str, who))} while"
                    f" {' and '.join(by)} held it"
                )
            else:
                state = "NEVER MET" + (" (allow_miss)" if armed.allow_miss else "")
            lines.append(f"port fault {armed.describe()}: {state}")
        return lines

    @staticmethod
    def _stolen_line(armed: ArmedPortFault, fault: PortStolen) -> str:
        hit = armed.hits[0]
        binds = f"; {len(armed.binds)} bind(s) of it seen since" if armed.binds else ""
        if fault.by is None:
            return (
                f"member {hit.member}'s probe of port {hit.port} (pid {hit.pid}) was taken by the"
                f" test process{binds}"
            )
        return (
            f"member {hit.member}'s probe (pid {hit.pid}) returned port {hit.port}, which"
            f" {hit.taken_by} had probed{binds}"
        )

    def misses(self) -> list[str]:
        """Why each fault that was never met (and may not be missed) proves nothing."""
        return [
            self._miss_message(armed)
            for armed in self.armed
            if not armed.met and not armed.allow_miss
        ]

    def _miss_message(self, armed: ArmedPortFault) -> str:
        fault = armed.fault
        if isinstance(fault, PortTaken):
            k = fault.member
            if fault.hold is None:
                until = "until the fleet stops"
            elif armed.released_t is not None and self.released_t is not None:
                until = f"until {armed.released_t - self.released_t:.2f} s after the release"
            else:
                until = f"for {fault.hold:g} s of member {k}'s own time after the release"
            why = (
                f"member {k} never tried to bind port {armed.port} while it was taken (the test"
                f" process held it from before member {k} started {until})"
            )
        elif isinstance(fault, PortStolen):
            return self._stolen_miss(armed, fault)
        else:
            why = (
                f"neither member {fault.members[0]} nor member {fault.members[1]} tried to bind"
                f" port {armed.port} while the other one listened on it"
            )
        seen = "; ".join(self._binds_seen(index) for index in fault.involved)
        return (
            f"port fault {fault.describe()} on port {armed.port} never met: {why} ({seen})."
            " A port fault that was never met proves nothing; if the server may legitimately"
            f" not bind this port while it is taken, pass allow_miss=True to {fault.kind}()."
        )

    def _stolen_miss(self, armed: ArmedPortFault, fault: PortStolen) -> str:
        k, j = fault.member, fault.by
        never = [index for index in fault.involved if not armed.probed(index)]
        if never:
            why = " and ".join(
                f"member {index} never probed a port (no TCP socket its processes bound to an"
                " internet address was closed)"
                for index in never
            )
        elif j is None:
            why = f"member {k} probed port {armed.probed(k)[0]}, but " + (
                f"the test process could not take it: {armed.take_error}"
                if armed.take_error
                else "the fleet had stopped"
            )
        else:
            why = (
                f"member {j}'s probes never returned a port member {k} probed (member {k}"
                f" probed {_ports(armed.probed(k))}; member {j} probed {_ports(armed.probed(j))})"
            )
        seen = "; ".join(self._binds_seen(index) for index in fault.involved)
        return (
            f"port fault {fault.describe()} never met: {why} ({seen}). A port fault that was"
            " never met proves nothing; a member probes a port by binding a TCP socket (port 0,"
            " or a scan), reading its port and closing it, in Python. If the server may"
            f" legitimately not probe, pass allow_miss=True to {fault.kind}()."
        )

    def _binds_seen(self, index: int) -> str:
        """'member 1 (EXITED with code 1 ...): binds port 0 at +0.12 s' for a miss message."""
        members = self._members
        if members is None or self._controller is None:
            return f"member {index}"
        label = members.label(index)
        with self._controller.lock:
            binds = [event for event in self._controller.binds if event.member == label]
        head = f"member {index} ({members.status(index)})"
        if not binds:
            if not self.python:
                return f"{head}: its binds cannot be seen: it does not run Python"
            return f"{head}: no bind reported"
        start = self.released_t if self.released_t is not None else binds[0].t
        shown = ", ".join(
            f"port {event.port} at {event.t - start:+.2f} s" for event in binds[:SHOWN_BINDS]
        )
        more = f" and {len(binds) - SHOWN_BINDS} more" if len(binds) > SHOWN_BINDS else ""
        return f"{head}: binds {shown}{more}"


def _ports(ports: list[int]) -> str:
    return "port " + ", ".join(map(str, ports)) if ports else "no port"


def _checked(faults: object, count: int, needs_port: bool, ready_label: str) -> list[PortFault]:
    """``faults=`` as a list of port faults, or a clear error before anything starts."""
    if faults is None:
        return []
    if isinstance(faults, (PortTaken, SamePort, PortStolen)):
        faults = [faults]
    if isinstance(faults, (str, bytes, dict)) or not isinstance(faults, Iterable):
        raise ArgumentTypeError(
            f"invalid faults={faults!r} for {WHERE}: expected a list of faults: {FAULTS_ACCEPTED}"
        )
    checked: list[PortFault] = []
    taken_by: dict[int, tuple[int, PortFault]] = {}
    for position, fault in enumerate(faults):
        where = f"faults[{position}] of {WHERE}"
        if not isinstance(fault, (PortTaken, SamePort, PortStolen)):
            raise ArgumentTypeError(
                f"invalid {where}: {fault!r}; expected {FAULTS_ACCEPTED} (from"
                " pytest_startup_guard)"
            )
        if not needs_port and not isinstance(fault, PortStolen):  # it faults a port picked
            raise InvalidArgumentError(
                f"{fault.describe()} ({where}) faults the members' port, but this launch has"
                f" none: its argv has no {{port}} and ready={ready_label or 'its probe'} needs"
                " no port; put {port} in the command"
            )
        for index in fault.involved:
            if index >= count:
                raise InvalidArgumentError(
                    f"invalid member {index} in {fault.describe()} ({where}): expected a member"
                    f" index from 0 to {count - 1} (count={count})"
                )
            if index in taken_by:
                other_position, other = taken_by[index]
                raise InvalidArgumentError(
                    f"member {index} is in two port faults of {WHERE}:"
                    f" faults[{other_position}] {other.describe()} and faults[{position}]"
                    f" {fault.describe()}; a member takes part in one port fault at most"
                )
        for index in fault.involved:
            taken_by[index] = (position, fault)
        checked.append(fault)
    return checked


def listening_ports(pids: Iterable[int]) -> set[int] | None:
    """The TCP ports the processes ``pids`` listen on, or None where none could be read (no
    permission to see their sockets, and none found). A process that is gone listens on none."""
    import psutil

    ports: set[int] = set()
    denied = False
    for pid in pids:
        try:
            process = psutil.Process(pid)
            # psutil 6 renamed connections() to net_connections()
            read = getattr(process, "net_connections", None) or process.connections
            connections = read(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        except psutil.Error:
            denied = True
            continue
        ports.update(
            connection.laddr.port
            for connection in connections
            if connection.status == psutil.CONN_LISTEN and connection.laddr
        )
    return None if denied and not ports else ports
