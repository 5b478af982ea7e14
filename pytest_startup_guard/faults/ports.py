"""The engine of the port faults: it checks a launch's, hears its members' binds and probes,
and reads where a member listens.

The kinds are modules of their own: ``port_taken.py``, ``same_port.py``, ``port_stolen.py``
(what they share: ``port_base.py``); each armed fault answers for itself. Never vacuous: the
members of a launch with port faults report each bind of an internet address through the child
runtime (``socket.bind`` events, before the bind happens), and a fault never met fails the
launch unless ``allow_miss=True``.

A member in a port fault may end up serving on another port than the one it was told. Its
readiness is then probed only on a port its own process tree listens on, never through the
taker's or the other member's socket (``own_port``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.faults.port_base import (
    PORTS_MAX_AGE,
    WHERE,
    ArmedPortFault,
    Members,
)
from pytest_startup_guard.faults.port_stolen import PortStolen
from pytest_startup_guard.faults.port_taken import PortTaken
from pytest_startup_guard.faults.same_port import SamePort
from pytest_startup_guard.runtime.controller import RuntimeController
from pytest_startup_guard.runtime.events import AccessEvent, ProbeEvent, RuntimeListener
from pytest_startup_guard.runtime.own_time import MAX_STRETCH, OwnClock

PortFault = PortTaken | SamePort | PortStolen
PORT_FAULTS = (PortTaken, SamePort, PortStolen)
SHOWN_BINDS = 6  # binds of a member listed in a miss message
FAULTS_ACCEPTED = (
    "port_taken(member=k) or same_port(members=(i, j)) or port_stolen(member=k), or a fault"
    " on what processes do: fs_error(...), network_fs(...), lock_not_exclusive(...),"
    " interleave(...), listen_late(...)"
)


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
    when the fleet stops (a ``port_base.PortWatch`` for each of them)."""

    def __init__(
        self, faults: object, *, count: int, needs_port: bool, ready_label: str = ""
    ) -> None:
        self.faults = _checked(faults, count, needs_port, ready_label)
        self.armed: list[ArmedPortFault] = []
        self.released_t: float | None = None
        self.python = True  # the members run Python: they report their binds
        self.stopping = threading.Event()
        self._controller: RuntimeController | None = None
        self._members: Members | None = None
        self._seen: dict[int, tuple[float, set[int] | None]] = {}
        self._seen_lock = threading.Lock()
        self._listener = _BindListener(self)

    def __bool__(self) -> bool:
        return bool(self.faults)

    @property
    def members(self) -> Members | None:
        return self._members

    def involves(self, index: int) -> bool:
        """Whether member ``index``'s own port (the one it is told) is faulted: it is then
        probed for readiness only where its own tree listens (``port_stolen`` leaves it be)."""
        return any(index in fault.involved for fault in self.faults if fault.tells_port)

    def fault_of(self, index: int) -> ArmedPortFault | None:
        for armed in self.armed:
            if index in armed.members:
                return armed
        return None

    def told_ports(self, leased: list[int | None]) -> list[int | None]:
        """The port each member is told: its lease's, unless a fault tells it another
        (same_port's second member is told the first one's)."""
        ports = list(leased)
        for fault in self.faults:
            fault.tell(ports)
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
        self.armed = [fault.arm(n, told, self) for n, fault in enumerate(self.faults)]
        for armed in self.armed:
            armed.on_armed()
        controller.report_binds()
        if any(armed.hears_probes for armed in self.armed):
            controller.report_probes()
        controller.subscribe(self._listener)

    def released(self, t: float) -> None:
        """The fleet was released at ``t``: the holds of ``port_taken`` faults count from now."""
        self.released_t = t
        for armed in self.armed:
            armed.on_release(t)

    def give_back_later(
        self, armed: ArmedPortFault, hold: float, clock: OwnClock | None, started: float
    ) -> None:
        threading.Thread(
            target=self._give_back_after,
            args=(armed, hold, clock, started),
            name=f"startup-guard-{armed.kind}-{armed.port}",
            daemon=True,
        ).start()

    def _give_back_after(
        self, armed: ArmedPortFault, hold: float, clock: OwnClock | None, started: float
    ) -> None:
        """Give the port back once the member has had ``hold`` seconds of its own time since
        ``started`` (or ``MAX_STRETCH`` x ``hold`` in wall time passed), or the fleet stopped."""
        while True:
            now = time.monotonic()
            own = clock.own(now) if clock is not None else now - started
            if own >= hold or now - started >= hold * MAX_STRETCH:
                break
            if self.stopping.wait(max(0.001, min(hold - own, 0.02))):
                break
        self.give_back(armed)

    def give_back(self, armed: ArmedPortFault) -> None:
        if self._controller is None:
            armed.give_back()
            return
        with self._controller.lock:  # never while a bind of the port is being judged
            armed.give_back()

    def settle(self) -> None:
        """Wait until each fault has seen what it may still see after the members were
        watched (``port_taken`` with a hold: met, or its port given back)."""
        for armed in self.armed:
            armed.settle()

    def close(self) -> None:
        """Give every taken port back and stop listening for binds (the fleet stops)."""
        self.stopping.set()
        for armed in self.armed:
            self.give_back(armed)
        if self._controller is not None:
            self._controller.unsubscribe(self._listener)

    # -- binds and probes (the controller's thread, its lock held) -----------------------

    def on_bind(self, event: AccessEvent) -> float | None:
        """A member's bind: held while its port is taken, recorded as a fault met."""
        port = event.port
        if not port:
            return None
        for armed in self.armed:
            wait = armed.hold_bind(event, port)
            if wait:
                return wait
        for armed in self.armed:
            if armed.port != port:
                continue
            index = self.index_of(event, armed.members)
            if index is not None:
                return armed.on_bind(event, index)
        return None

    def on_probe(self, event: ProbeEvent) -> float | None:
        """A member closed a socket it had bound to a port: the fault that hears its probes."""
        for armed in self.armed:
            if not armed.hears_probes:
                continue
            index = self.index_of(event, armed.members)
            if index is not None:
                return armed.on_probe(event, index)
        return None

    def index_of(self, event: AccessEvent | ProbeEvent, indexes: Iterable[int]) -> int | None:
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
        return armed.cause(index) if armed is not None else None

    def lines(self) -> list[str]:
        """One line per fault: met or not, and by what, for a fleet's summary."""
        return [line for armed in self.armed for line in armed.lines()]

    def misses(self) -> list[str]:
        """Why each fault that was never met (and may not be missed) proves nothing."""
        return [miss for armed in self.armed if (miss := armed.miss()) is not None]

    def binds_seen(self, index: int) -> str:
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


def _checked(faults: object, count: int, needs_port: bool, ready_label: str) -> list[PortFault]:
    """``faults=`` as a list of port faults, or a clear error before anything starts."""
    if faults is None:
        return []
    if isinstance(faults, PORT_FAULTS):
        faults = [faults]
    if isinstance(faults, (str, bytes, dict)) or not isinstance(faults, Iterable):
        raise ArgumentTypeError(
            f"invalid faults={faults!r} for {WHERE}: expected a list of faults: {FAULTS_ACCEPTED}"
        )
    checked: list[PortFault] = []
    taken_by: dict[int, tuple[int, PortFault]] = {}
    for position, fault in enumerate(faults):
        where = f"faults[{position}] of {WHERE}"
        if not isinstance(fault, PORT_FAULTS):
            raise ArgumentTypeError(
                f"invalid {where}: {fault!r}; expected {FAULTS_ACCEPTED} (from"
                " pytest_startup_guard)"
            )
        if not needs_port and fault.tells_port:  # port_stolen faults a port picked
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
