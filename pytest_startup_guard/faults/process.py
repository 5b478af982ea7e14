"""Faults on what a launch's processes do, not on its ports: ``launch(faults=[...])`` takes them
beside the port faults (``ports.py``).

A process fault is armed before any member starts, hears every access of the fleet's
processes through the child runtime (``RuntimeListener``) and may answer one with an errno
(``AccessAnswer``): the process's own call fails as the system call would. Like a port fault
it is never vacuous: one that no process met fails the launch, unless made with
``allow_miss=True``; and a member that died of one is told so in its exit reason.

``fs_error.py``, ``network_fs.py``, ``interleave.py`` and ``listen_late.py`` hold the faults;
this module is what they share (``ProcessFault``, ``FaultContext``, ``ArmedProcessFault``: an
``ArmedFault`` of ``protocol.py``) and the set of one launch's (``ProcessFaults``, which
``armed.ArmedFaults`` holds).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast

from pytest_startup_guard.errors import InvalidArgumentError
from pytest_startup_guard.faults.protocol import FaultEffect, MissFromWhy
from pytest_startup_guard.races.roots import PluginRoots
from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    AccessAnswer,
    AccessEvent,
    RuntimeListener,
)


@dataclass(frozen=True)
class FaultContext:
    """What a fault needs to arm on one launch."""

    controller: RuntimeController
    group: str  # the fleet's member label prefix: "<group>:" starts each member's label
    roots: PluginRoots  # the folders of this test a fault may touch
    where: str  # "faults[2] of server_fleet.launch()"
    ports: tuple[int | None, ...] = ()  # the port each member is told (None: no {port})

    def checked_path(self, fault: str, path: str) -> tuple[Path, tuple[str, str]]:
        """``path`` of the fault described ``fault``, refused unless it lies under the test's
        folders (naming the fault and ``where``): resolved, and the pair its accesses are
        matched against (as given, absolute; and resolved)."""
        _name, _root, resolved = self.roots.check(path, f"{fault} ({self.where})", allow_root=True)
        return resolved, (os.path.abspath(path), str(resolved))

    def watched_path(self, fault: str, path: str) -> tuple[str, str]:
        """``checked_path``'s pair, once the controller watches the folder (for a file: the
        folder it is in)."""
        resolved, paths = self.checked_path(fault, path)
        self.controller.watch(resolved if os.path.isdir(resolved) else resolved.parent)
        return paths


@dataclass(eq=False)  # a listener: compared by identity
class ArmedProcessFault(MissFromWhy, RuntimeListener):
    """One process fault on one launch; it hears the fleet's accesses from its arming on.
    Subclasses (dataclasses) narrow ``fault`` (what was given), and answer ``met``,
    ``effects`` and ``why_missed``."""

    fault: ProcessFault
    context: FaultContext
    closed: bool = field(default=False, kw_only=True)  # stopped: it answers no access now
    # the fleet's release (``ProcessFaults.released``)
    released_t: float | None = field(default=None, kw_only=True)

    @property
    def allow_miss(self) -> bool:
        return self.fault.allow_miss

    def describe(self) -> str:
        return self.fault.describe()

    @property
    def effects(self) -> list[FaultEffect]:
        """What it did to which process of the fleet."""
        raise NotImplementedError

    def lines(self) -> list[str]:
        """What it did, one line each, for the fleet's summary."""
        return []

    def cause(self, index: int) -> str | None:
        """What it did to member ``index``, for the reason a member died; None: nothing."""
        return None

    def close(self) -> None:
        """Stop: it answers no access from now on."""
        self.closed = True

    # -- helpers for subclasses ----------------------------------------------------------

    def member_index(self, event: AccessEvent) -> int | None:
        """The index of the fleet member whose tree made ``event``; None for the test process,
        another fleet's processes and unrelated ones."""
        member = event.member
        if member is None or not member.startswith(self.context.group):
            return None
        tail = member[len(self.context.group) :]
        return int(tail) if tail.isdigit() else None

    def since_release(self, t: float) -> str:
        """``+0.12 s`` from the fleet's release (or ``at t`` before it)."""
        if self.released_t is None:
            return f"at {t:.3f}"
        return f"at {t - self.released_t:+.3f} s"


class ProcessFault(Protocol):
    """A fault given in ``launch(faults=[...])`` that acts on what processes do (marked by a
    ``process_fault`` class attribute, set to True)."""

    @property
    def allow_miss(self) -> bool: ...

    def describe(self) -> str: ...

    def named_members(self) -> tuple[int, ...]:
        """The member indexes it names (``member=``, ``members=``, ``first=``...): each is
        checked against the launch's count before anything starts (``ProcessFaults``)."""
        ...

    def arm(self, context: FaultContext) -> ArmedProcessFault:
        """Check the fault against this launch (paths under the test's folders, members in
        range: a clear error naming ``context.where``) and start it."""
        ...


def is_process_fault(value: object) -> bool:
    """A fault on what processes do (it arms itself on a launch), not a port fault."""
    return callable(getattr(value, "arm", None)) and getattr(value, "process_fault", False) is True


def split_faults(faults: object) -> tuple[object, list[tuple[int, ProcessFault]]]:
    """``faults=`` of a launch split in two: what the port faults check (``ports``,
    which refuses what is neither kind, naming it) and the process faults with their
    positions. A list may mix both kinds."""
    if faults is None or isinstance(faults, (str, bytes, dict)):
        return faults, []
    if is_process_fault(faults):
        return None, [(0, cast(ProcessFault, faults))]
    if not isinstance(faults, Iterable):
        return faults, []
    given = list(faults)
    process = [
        (position, cast(ProcessFault, fault))
        for position, fault in enumerate(given)
        if is_process_fault(fault)
    ]
    rest = [fault for fault in given if not is_process_fault(fault)]
    return (rest if rest or not process else None), process


class _Forwarder(RuntimeListener):
    """Hears the controller for the launch's armed faults; the first errno wins."""

    def __init__(self, armed: list[ArmedProcessFault]) -> None:
        self.armed = armed

    def on_access(self, event: AccessEvent) -> AccessAnswer | None:
        failure: AccessAnswer | None = None
        wait = 0.0
        for fault in self.armed:
            answer = fault.on_access(event)
            if answer is None:
                continue
            if answer.errno and failure is None:
                failure = answer
            wait = max(wait, answer.wait)
        if failure is not None:
            return failure
        return AccessAnswer(wait=wait) if wait > 0 else None

    def on_bind(self, event: AccessEvent) -> float | None:
        waits = [wait for fault in self.armed if (wait := fault.on_bind(event))]
        return max(waits) if waits else None

    def on_gone(self, pid: int) -> None:
        for fault in self.armed:
            fault.on_gone(pid)


class ProcessFaults:
    """The process faults of one launch."""

    def __init__(
        self, faults: Sequence[tuple[int, ProcessFault]], count: int | None = None, where: str = ""
    ) -> None:
        """``count``: the launch's members, which every member a fault names must be among
        (a fault on member 5 of a fleet of 2 is refused here, not found "never met" once the
        members ran); None: not checked (a fleet before its launch)."""
        if count is not None:
            for position, fault in faults:
                _check_members(fault, count, f"faults[{position}] of {where}")
        self.faults = list(faults)  # (position in faults=, fault)
        self.armed: list[ArmedProcessFault] = []
        self._forwarder: _Forwarder | None = None
        self._controller: RuntimeController | None = None

    def __bool__(self) -> bool:
        return bool(self.faults)

    def arm(
        self,
        controller: RuntimeController,
        group: str,
        roots: PluginRoots,
        where: str,
        ports: Sequence[int | None] = (),
    ) -> None:
        for position, fault in self.faults:
            context = FaultContext(
                controller, group, roots, f"faults[{position}] of {where}", tuple(ports)
            )
            self.armed.append(fault.arm(context))
        if self.armed:
            self._forwarder = _Forwarder(self.armed)
            self._controller = controller
            controller.subscribe(self._forwarder)

    def released(self, t: float) -> None:
        for armed in self.armed:
            armed.released_t = t

    def misses(self) -> list[str]:
        return [miss for armed in self.armed if (miss := armed.miss()) is not None]

    def lines(self) -> list[str]:
        return [line for armed in self.armed for line in armed.lines()]

    def cause(self, index: int) -> str | None:
        causes = [cause for armed in self.armed if (cause := armed.cause(index)) is not None]
        return "; ".join(causes) if causes else None

    def close(self) -> None:
        for armed in self.armed:
            armed.close()
        if self._forwarder is not None and self._controller is not None:
            self._controller.unsubscribe(self._forwarder)
            self._forwarder = None


def _check_members(fault: ProcessFault, count: int, where: str) -> None:
    for index in fault.named_members():
        if index >= count:
            raise InvalidArgumentError(
                f"invalid member {index} in {fault.describe()} ({where}): expected a member"
                f" index from 0 to {count - 1} (count={count})"
            )


def described(name: str, *parts: str | None, allow_miss: bool) -> str:
    """``name(part, part, allow_miss=True)``: a fault as it was made; None parts (arguments
    left at their defaults) are left out."""
    shown = [part for part in parts if part is not None]
    if allow_miss:
        shown.append("allow_miss=True")
    return f"{name}({', '.join(shown)})"


def under(path: str, root: str) -> bool:
    """``path`` is ``root`` or lies under it (both absolute, as the child runtime reports)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
