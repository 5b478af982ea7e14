"""What the three port faults share: their words, their records, and the armed fault's base.

``port_taken.py``, ``same_port.py`` and ``port_stolen.py`` each hold one kind: the fault as
given, its constructor and its armed form (``ArmedPortFault`` here), which answers for itself
(what a bind or a probe of its members does, its summary line, why it missed, what it did to a
member). ``ports.py`` is the engine the three share: it checks a launch's port faults, hears the
members' binds and probes, and reads where a member listens (``PortWatch``, as they see it).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from pytest_startup_guard.checks import MAX_SECONDS, UP_TO_A_DAY
from pytest_startup_guard.errors import InvalidArgumentError, StartupGuardError
from pytest_startup_guard.faults.protocol import FaultEffect, MissFromWhy
from pytest_startup_guard.runtime.events import AccessEvent, ProbeEvent
from pytest_startup_guard.runtime.own_time import OwnClock

DEFAULT_HOLD = 1.0
TAKER_HOST = "127.0.0.1"
PORTS_MAX_AGE = 0.05  # seconds: how long a member's listening ports, once read, count as current
# Addresses whose bind of a port conflicts with a socket listening on 127.0.0.1 (Linux: the
# wildcards do; "::" as long as it is dual-stack, the default). A bind of another address
# (127.0.0.2, ::1, a real interface) is recorded, and never counts as meeting a fault.
LOOPBACK_CONFLICTS = frozenset({"127.0.0.1", "localhost", "", "0.0.0.0", "::", "::ffff:127.0.0.1"})
WHERE = "server_fleet.launch()"
NEVER_MET = "A port fault that was never met proves nothing"


def is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def checked_hold(hold: object, where: str) -> float | None:
    """``hold`` as seconds > 0, or None (until the fleet stops)."""
    if hold is None:
        return None
    if (
        isinstance(hold, bool)
        or not isinstance(hold, (int, float))
        or not math.isfinite(hold)
        or hold <= 0
        or hold > MAX_SECONDS
    ):
        raise InvalidArgumentError(
            f"invalid hold={hold!r} for {where}: expected seconds > 0{UP_TO_A_DAY}, or None"
            " (taken until the fleet stops)"
        )
    return float(hold)


def described_hold(hold: float | None) -> str:
    return "None" if hold is None else f"{hold:g}"


def described_miss(allow_miss: bool) -> str:
    return ", allow_miss=True" if allow_miss else ""


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


class PortWatch(Protocol):
    """What an armed port fault asks of its launch's engine (``ports.PortFaults``)."""

    released_t: float | None  # the fleet's release
    stopping: threading.Event  # set when the fleet stops: nothing waits any more

    @property
    def members(self) -> Members | None: ...

    def index_of(self, event: AccessEvent | ProbeEvent, indexes: Iterable[int]) -> int | None:
        """Which of the members ``indexes`` the event's process belongs to, if any."""

    def listens(self, index: int, port: int, max_age: float = PORTS_MAX_AGE) -> bool: ...

    def binds_seen(self, index: int) -> str:
        """Member ``index``'s binds, for a miss message."""

    def give_back(self, armed: ArmedPortFault) -> None:
        """Give a taken port back, never while a bind of it is being judged."""

    def give_back_later(
        self, armed: ArmedPortFault, hold: float, clock: OwnClock | None, started: float
    ) -> None:
        """Give the port back once ``hold`` seconds of the member's own time have passed."""


class PortFaultGiven(Protocol):
    """A port fault as given: ``PortTaken``, ``SamePort`` or ``PortStolen``."""

    kind: ClassVar[str]
    tells_port: ClassVar[bool]  # it faults the port a member is told (not one it picks)

    @property
    def allow_miss(self) -> bool: ...

    @property
    def involved(self) -> tuple[int, ...]: ...

    def describe(self) -> str: ...


@dataclass
class ArmedPortFault(MissFromWhy):
    """One port fault of one launch: its port, and what met it. Each kind's armed form
    (``ArmedPortTaken``, ``ArmedSamePort``, ``ArmedPortStolen``) answers for itself."""

    fault: PortFaultGiven
    port: int
    position: int  # its index in ``faults=``
    watch: PortWatch = field(repr=False, compare=False)
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

    hears_probes: ClassVar[bool] = False  # its members' probes matter to it (port_stolen)

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

    @property
    def effects(self) -> list[FaultEffect]:
        """Each hit: the member's process, and what the fault did to it."""
        return [FaultEffect(hit.member, hit.pid, self.hit_words(hit)) for hit in self.hits]

    def hit_words(self, hit: PortHit) -> str:
        return f"its bind of port {hit.port} met the port held by {hit.taken_by}"

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

    # -- the life of a launch: each kind overrides what it does ---------------------------

    def on_armed(self) -> None:
        """Every port fault of the launch is armed; no member has started yet."""

    def on_release(self, t: float) -> None:
        """The fleet was released at ``t``."""

    def settle(self) -> None:
        """Wait, after the members were watched, for what the fault may still see."""

    def hold_bind(self, event: AccessEvent, port: int) -> float | None:
        """Any member's bind of ``port``, before the faults of that port hear it: seconds it
        waits, or None."""
        return None

    def on_bind(self, event: AccessEvent, index: int) -> float | None:
        """Member ``index`` binds the faulted port: seconds it waits, or None."""
        self.binds.append(event)
        return None

    def on_probe(self, event: ProbeEvent, index: int) -> float | None:
        """Member ``index`` probed a port (``hears_probes`` only): seconds it waits, or None."""
        return None

    # -- what it comes to ----------------------------------------------------------------

    def lines(self) -> list[str]:
        """Met or not, and by what, for a fleet's summary."""
        if self.met:
            state = f"met: {self.met_words()}"
        else:
            state = "NEVER MET" + (" (allow_miss)" if self.allow_miss else "")
        return [f"port fault {self.describe()}: {state}"]

    def met_words(self) -> str:
        by = sorted({hit.taken_by for hit in self.hits})
        who = sorted({hit.member for hit in self.hits})
        return (
            f"{len(self.hits)} bind(s) by member {', '.join(map(str, who))} while"
            f" {' and '.join(by)} held it"
        )

    def binds_seen(self) -> str:
        return "; ".join(self.watch.binds_seen(index) for index in self.members)

    def bind_miss(self, why: str) -> str:
        """The miss message of a fault on a port told (``port_taken``, ``same_port``)."""
        return (
            f"port fault {self.fault.describe()} on port {self.port} never met: {why}"
            f" ({self.binds_seen()}). {NEVER_MET}; if the server may legitimately not bind"
            f" this port while it is taken, pass allow_miss=True to {self.kind}()."
        )

    def cause(self, index: int) -> str | None:
        """Why member ``index`` could not bind its port, naming the fault; None: not a member
        of it."""
        return self.member_cause(index) if index in self.members else None

    def member_cause(self, index: int) -> str | None:
        raise NotImplementedError
