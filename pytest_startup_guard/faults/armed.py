"""``ArmedFaults``: every fault of one launch, checked, armed and closed in one place.

``launch(faults=[...])`` takes a list that may mix every family: port faults (``ports``),
locks that do not exclude (``lock_not_exclusive``) and faults on what processes do
(``process``). This is the one object the launcher and the fleet hold: it checks the list
before anything starts, arms each family before the members start, tells them the release,
collects their misses, summary lines and causes in one order (ports, processes, locks), and
closes them. ``listed()`` is every armed fault in the order given, each an ``ArmedFault``
(``protocol``): ``Fleet.faults``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_startup_guard.faults.lock_not_exclusive import (
    LockFaults,
    LockNotExclusive,
    split_lock_faults,
)
from pytest_startup_guard.faults.port_base import Members
from pytest_startup_guard.faults.ports import PortFaults
from pytest_startup_guard.faults.process import ProcessFaults, is_process_fault, split_faults
from pytest_startup_guard.faults.protocol import ArmedFault
from pytest_startup_guard.races.roots import PluginRoots
from pytest_startup_guard.runtime.controller import RuntimeController

WHERE = "server_fleet.launch()"


@dataclass(frozen=True)
class LaunchShape:
    """What the faults of a launch are checked against before anything starts."""

    count: int  # members
    needs_port: bool  # its argv or its probe needs a port per member
    ready_label: str = ""  # its readiness probe, for messages
    roots: PluginRoots | None = None  # the folders of this test a fault may touch


@dataclass(frozen=True)
class ArmingPlace:
    """Where the faults of a launch arm: its controller, its fleet and its members."""

    controller: RuntimeController
    group: str  # the fleet's barrier group: its members are labelled "<group>:<index>"
    told: list[int | None]  # the port each member is told
    members: Members  # the members as the port faults see them
    python: bool  # the members run Python (they report their binds)
    roots: PluginRoots  # the folders of this test a fault may touch


class ArmedFaults:
    """The faults of one launch, every family: see the module's docstring."""

    def __init__(self, faults: object, shape: LaunchShape | None = None) -> None:
        """Check ``faults=`` (refused here, naming what is wrong, before anything starts): the
        lock faults' paths first, then the port faults; a process fault checks itself as it
        arms. ``shape`` None: a launch with no faults (a fleet before its launch)."""
        count = shape.count if shape is not None else None  # None: no launch to check against
        shape = shape if shape is not None else LaunchShape(0, False)
        if isinstance(faults, Iterable) and not isinstance(faults, (str, bytes, dict)):
            faults = list(faults)  # read once: by each family, and for their order
        rest, locks = split_lock_faults(faults)
        self.locks = LockFaults(locks, shape.roots)
        ports, processes = split_faults(rest)
        self.ports = PortFaults(
            ports, count=shape.count, needs_port=shape.needs_port, ready_label=shape.ready_label
        )
        self.processes = ProcessFaults(processes, count, WHERE)
        self._order = _families_in_order(faults)
        self.released_t: float | None = None

    def __bool__(self) -> bool:
        return bool(self.ports or self.processes or self.locks)

    def told_ports(self, leased: list[int | None]) -> list[int | None]:
        """The port each member is told (``same_port`` tells one member another's)."""
        return self.ports.told_ports(leased)

    def arm(self, place: ArmingPlace) -> None:
        """Arm every fault before any member starts; if one cannot, close them all and
        raise its error."""
        try:
            self.ports.arm(place.controller, place.told, place.members, python=place.python)
            self.processes.arm(place.controller, f"{place.group}:", place.roots, WHERE, place.told)
            self.locks.arm(place.controller, place.group)
        except BaseException:
            self.close()
            raise

    def released(self, t: float) -> None:
        """The fleet was released at ``t``: holds count, and messages tell times, from it."""
        self.released_t = t
        self.ports.released(t)
        self.processes.released(t)
        self.locks.released(t)

    def settle(self) -> None:
        """After the members were watched: wait for what a fault may still see."""
        self.ports.settle()

    def close(self) -> None:
        """Stop every fault (ports taken are given back): the fleet stops."""
        self.ports.close()
        self.processes.close()
        self.locks.close()

    # -- what they come to ---------------------------------------------------------------

    def listed(self) -> list[ArmedFault]:
        """Every armed fault, in the order given to the launch."""
        families: dict[str, Iterator[ArmedFault]] = {
            "port": iter(self.ports.armed),
            "process": iter(self.processes.armed),
            "lock": iter(self.locks.armed),
        }
        listed = [next(families[family], None) for family in self._order]
        return [armed for armed in listed if armed is not None]

    def misses(self) -> list[str]:
        """Why each fault never met (and not allowed to miss) proves nothing."""
        return [*self.ports.misses(), *self.processes.misses(), *self.locks.misses()]

    def lines(self) -> list[str]:
        """What each fault came to, for the fleet's summary."""
        return [*self.ports.lines(), *self.processes.lines(), *self.locks.lines()]

    def exit_causes(self, index: int, *, address_in_use: bool, port: int | None) -> list[str]:
        """What the faults did to member ``index``, which exited, for its reason: the port
        fault it was in when its output says a bind failed (or that its port was taken), and
        what processes faults did to it."""
        causes = []
        if address_in_use:
            cause = self.ports.cause(index)
            if cause is not None:
                causes.append(cause)
            elif port is not None:
                causes.append(f"port {port} was taken before it could bind it")
        cause = self.processes.cause(index)
        if cause is not None:
            causes.append(cause)
        return causes

    def failure_cause(self, index: int) -> str | None:
        """What the lock faults did to member ``index``, which failed: asked once every member
        was watched, when each lock's takes are known."""
        return self.locks.cause(index)


def check_faults(faults: object, shape: LaunchShape) -> None:
    """Every check of ``faults=`` that needs no test folder (the lock faults' paths are checked
    where the launch arms them, against the test's roots), before the launch does anything:
    ``server_fleet.launch()`` refuses a bad fault at the call (``fleet.spec``)."""
    ArmedFaults(faults, shape)  # its constructor checks, arms nothing: dropped


def _families_in_order(faults: object) -> list[str]:
    """Which family each fault given is, in the order given (only the faults a launch accepts
    are armed, so this is read once they were checked)."""
    given: Sequence[object]
    if faults is None or isinstance(faults, (str, bytes, dict)):
        given = []
    elif isinstance(faults, Iterable):
        given = list(faults)
    else:
        given = [faults]
    return [_family(fault) for fault in given]


def _family(fault: object) -> str:
    if isinstance(fault, LockNotExclusive):
        return "lock"
    return "process" if is_process_fault(fault) else "port"


if TYPE_CHECKING:  # mypy checks that the wire's faults answer the same protocol
    from pytest_startup_guard.remote.wire_faults import ArmedWireFault

    _WIRE: type[ArmedFault] = ArmedWireFault
