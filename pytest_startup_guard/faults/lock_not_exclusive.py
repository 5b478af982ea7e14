"""Lock faults: locks that do not exclude, as on Lustre, GPFS and some NFS mounts.

``lock_not_exclusive(path, allow_miss=False)`` for ``server_fleet.launch(faults=[...])``: in
every process of the fleet (members and their descendants), ``fcntl.flock`` and ``fcntl.lockf``
on ``path``, or on any file under it if it is a folder, return at once as a successful lock
would, and lock nothing (huggingface/huggingface_hub#4306: two downloads appending into one
``.incomplete`` file on a file system whose ``flock`` is a no-op; ibm-granite/granite.build#322).
filelock's ``FileLock`` and huggingface_hub's download lock take ``flock``: both go through.

The overlap is made certain: the first process to take a faulted lock (exclusively) waits at its
take, until a second process has taken it too, or ``FIRST_TAKER_WAIT`` seconds of its own time
have passed; then both go on into what the lock protects at once. (Waiting at the release
instead would let the second one in only after the first had done its work: a check-then-write
under the lock would see it done and never meet the fault.) Once two processes have held a
lock on a path at the same time, later takes on that path do not wait.

Never vacuous: the fault is met when two processes of the fleet held a lock on a faulted path at
the same time (at least one of them exclusively: two shared locks may overlap anywhere); a
fault never met fails the launch, saying who locked what when, unless ``allow_miss=True``. A
member that exits with a failure after it held a faulted lock at the same time as another is
named with the fault. The child side is ``runtime/child/locks.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pytest_startup_guard.checks import flag
from pytest_startup_guard.checks import path as checked_path
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.faults.protocol import FaultEffect, MissFromWhy
from pytest_startup_guard.races.roots import PluginRoots
from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    LockEvent,
    RuntimeListener,
)
from pytest_startup_guard.runtime.own_time import MAX_STRETCH, OwnClock

# Seconds of its own time the first taker of a faulted lock waits at its take for a second one.
FIRST_TAKER_WAIT = 2.0
WAIT_STEP = 0.005  # seconds a waiting taker sleeps before it asks again
SHOWN_TAKES = 6  # takes listed in a miss message
WHERE = "server_fleet.launch()"


@dataclass(frozen=True)
class LockNotExclusive:
    """``lock_not_exclusive(path)``: locks on ``path`` (resolved; a folder: under it) do not
    exclude in the members of a launch."""

    path: Path
    allow_miss: bool = False

    kind: ClassVar[str] = "lock_not_exclusive"

    def describe(self) -> str:
        miss = ", allow_miss=True" if self.allow_miss else ""
        return f"lock_not_exclusive({str(self.path)!r}{miss})"

    def covers(self, path: str) -> bool:
        faulted = str(self.path)
        return path == faulted or path.startswith(faulted.rstrip(os.sep) + os.sep)


def lock_not_exclusive(
    path: str | os.PathLike[str], *, allow_miss: bool = False
) -> LockNotExclusive:
    """A fault for ``server_fleet.launch(faults=[...])``: ``fcntl.flock`` and ``fcntl.lockf``
    on ``path`` (a lock file, or a folder: every file under it) lock nothing in any process of
    the fleet, as on Lustre, GPFS and some NFS mounts. Unless ``allow_miss=True``, the launch
    fails if no two processes held such a lock at the same time."""
    where = "lock_not_exclusive()"
    given = checked_path("path", path, where)
    flag("allow_miss", allow_miss, where)
    return LockNotExclusive(Path(os.path.realpath(os.path.abspath(given))), allow_miss)


@dataclass
class LockTake:
    """One process's take of a faulted lock, until its release (or its end)."""

    pid: int
    member: int | None  # the index of its fleet member
    path: str
    how: str  # "flock" or "lockf"
    exclusive: bool
    t: float  # time.monotonic() of the take
    released_t: float | None = None  # its LOCK_UN, or its end; None: held to the end


@dataclass(frozen=True)
class LockOverlap:
    """Two processes held a lock on ``path`` at the same time: ``second`` took it at ``t``
    while ``first`` held it."""

    path: str
    first: LockTake
    second: LockTake
    t: float


@dataclass
class ArmedLockFault(MissFromWhy):
    """One lock fault of one launch: who took its locks, and when two held one at once."""

    fault: LockNotExclusive
    position: int  # its index in ``faults=``
    takes: list[LockTake] = field(default_factory=list)
    overlaps: list[LockOverlap] = field(default_factory=list)
    _held: dict[str, dict[int, LockTake]] = field(default_factory=dict)  # path -> pid -> take
    _waits: dict[tuple[int, str], OwnClock] = field(default_factory=dict)  # a first taker's wait
    released_t: float | None = None  # the fleet's release, that times are counted from

    @property
    def met(self) -> bool:
        """Whether two processes really held a lock on the path at the same time."""
        return bool(self.overlaps)

    @property
    def allow_miss(self) -> bool:
        return self.fault.allow_miss

    @property
    def effects(self) -> list[FaultEffect]:
        """Each overlap: the process that took the lock while another held it."""
        return [
            FaultEffect(
                overlap.second.member,
                overlap.second.pid,
                f"it took {overlap.path} ({overlap.second.how}) while {_who(overlap.first)}"
                " held it",
            )
            for overlap in self.overlaps
        ]

    def describe(self) -> str:
        return self.fault.describe()

    def lines(self) -> list[str]:
        """Met or not, and by whom, for a failure message."""
        if self.met:
            state = f"met: {_overlap_words(self.overlaps[0], self.released_t)}"
            if len(self.overlaps) > 1:
                state += f" (and {len(self.overlaps) - 1} more)"
        else:
            state = "NEVER MET" + (" (allow_miss)" if self.allow_miss else "")
        return [f"lock fault {self.describe()}: {state}"]

    def why_missed(self) -> str:
        return (
            f"lock fault {self.describe()} never met: no two processes held a lock on"
            f" {self.fault.path} at the same time ({_takes_words(self, self.released_t)})."
            " A lock fault that was never met proves nothing; if the servers may legitimately"
            " not lock it, pass allow_miss=True to lock_not_exclusive()."
        )

    def cause(self, index: int) -> str | None:
        """With whom member ``index`` held which lock at once; None: it held none so."""
        return _shared_with(self, index) or None

    def __repr__(self) -> str:
        return f"<ArmedLockFault {self.describe()}: {len(self.overlaps)} overlaps>"

    def take(self, event: LockEvent, member: int | None) -> float | None:
        """A take: recorded, an overlap noted; the first taker waits for a second one."""
        held = self._held.setdefault(event.path, {})
        take = held.get(event.pid)
        if take is None:
            take = LockTake(event.pid, member, event.path, event.how, event.exclusive, event.t)
            for other in held.values():
                if other.exclusive or take.exclusive:
                    self.overlaps.append(LockOverlap(event.path, other, take, event.t))
            held[event.pid] = take
            self.takes.append(take)
        elif not event.again:  # taken again by its holder (shared to exclusive, or reentrant)
            take.exclusive = take.exclusive or event.exclusive
        if not take.exclusive or len(held) > 1 or self._met_on(event.path):
            return None
        clock = self._waits.setdefault((event.pid, event.path), OwnClock(event.pid, event.t))
        now = time.monotonic()
        if (
            clock.own(now) >= FIRST_TAKER_WAIT
            or now - clock.started >= FIRST_TAKER_WAIT * MAX_STRETCH
        ):
            return None  # nobody else came: it goes on alone (a miss, unless another comes)
        return WAIT_STEP

    def release(self, pid: int, path: str | None, t: float) -> None:
        """``pid`` released its lock on ``path`` (None: every lock it held: it ended)."""
        for held_path, held in self._held.items():
            if path is None or held_path == path:
                take = held.pop(pid, None)
                if take is not None:
                    take.released_t = t

    def _met_on(self, path: str) -> bool:
        return any(overlap.path == path for overlap in self.overlaps)


class _LockListener(RuntimeListener):
    """What a launch's lock faults hear from the child runtime: their members' lock calls."""

    def __init__(self, faults: LockFaults) -> None:
        self.faults = faults

    def on_lock(self, event: LockEvent) -> float | None:
        return self.faults.on_lock(event)

    def on_gone(self, pid: int) -> None:
        self.faults.gone(pid)


class LockFaults:
    """The lock faults of one launch: checked, then armed before the members start."""

    def __init__(
        self, faults: Iterable[tuple[int, LockNotExclusive]], roots: PluginRoots | None
    ) -> None:
        """``faults``: each with its position in ``faults=``; a path outside the folders the
        plugin owns for the test (``roots``) is refused here, before anything starts."""
        self.armed = [
            ArmedLockFault(_under_roots(fault, position, roots), position)
            for position, fault in faults
        ]
        self.group: str | None = None
        self._controller: RuntimeController | None = None
        self._listener = _LockListener(self)

    def __bool__(self) -> bool:
        return bool(self.armed)

    def arm(self, controller: RuntimeController, group: str) -> None:
        """Tell the members of fleet ``group``, at their hello, which locks do not exclude."""
        if not self.armed:
            return
        self.group, self._controller = group, controller
        controller.fault_locks(group, [str(armed.fault.path) for armed in self.armed])
        controller.subscribe(self._listener)

    # -- lock calls (the controller's thread, its lock held) ------------------------------

    def on_lock(self, event: LockEvent) -> float | None:
        member = self._member(event.member)
        if member is None:
            return None  # a process of another launch
        for armed in self.armed:
            if armed.fault.covers(event.path):
                if not event.acquire:
                    armed.release(event.pid, event.path, event.t)
                    return None
                return armed.take(event, member)
        return None

    def close(self) -> None:
        """Stop: the fleet is stopping, its faults hear nothing more."""
        if self._controller is not None:
            self._controller.unsubscribe(self._listener)

    def gone(self, pid: int) -> None:
        """A process that ended holds no lock any more."""
        now = time.monotonic()
        for armed in self.armed:
            armed.release(pid, None, now)

    def _member(self, label: str | None) -> int | None:
        if label is None or self.group is None or ":" not in label:
            return None
        group, index = label.rsplit(":", 1)
        return int(index) if group == self.group and index.isdigit() else None

    # -- what it comes to ----------------------------------------------------------------

    def released(self, t: float) -> None:
        """The fleet was released at ``t``: its messages count times from it."""
        for armed in self.armed:
            armed.released_t = t

    def cause(self, index: int) -> str | None:
        """The fault that explains a failure of member ``index``: one of its processes held a
        faulted lock at the same time as another process (None: none did)."""
        return next((cause for armed in self.armed if (cause := armed.cause(index))), None)

    def lines(self) -> list[str]:
        """One line per fault: met or not, and by whom, for a failure message."""
        return [line for armed in self.armed for line in armed.lines()]

    def misses(self) -> list[str]:
        """Why each fault that was never met (and may not be missed) proves nothing."""
        return [miss for armed in self.armed if (miss := armed.miss()) is not None]


def split_lock_faults(faults: object) -> tuple[object, list[tuple[int, LockNotExclusive]]]:
    """``faults=`` of a launch split in two: what is not a lock fault (for the other kinds of
    fault to check, unchanged where it is not a list) and the lock faults with their positions.
    A list may mix kinds."""
    if isinstance(faults, LockNotExclusive):
        return None, [(0, faults)]
    if faults is None or isinstance(faults, (str, bytes, dict)) or not isinstance(faults, Iterable):
        return faults, []
    given = list(faults)
    locks = [(n, fault) for n, fault in enumerate(given) if isinstance(fault, LockNotExclusive)]
    return [fault for fault in given if not isinstance(fault, LockNotExclusive)], locks


def _under_roots(
    fault: LockNotExclusive, position: int, roots: PluginRoots | None
) -> LockNotExclusive:
    """``fault`` if its path is (or lies under) a folder the plugin owns for this test: a lock
    that does not exclude lets the members write over each other there."""
    if roots is None:
        return fault
    owned = roots.roots()
    for root in owned.values():
        real = Path(os.path.realpath(root))
        if fault.path == real or str(fault.path).startswith(str(real).rstrip(os.sep) + os.sep):
            return fault
    where = f"{fault.describe()} (faults[{position}] of {WHERE})"
    allowed = ", ".join(f"{name} ({root})" for name, root in owned.items()) or (
        "none: ask for the shared_dir, hub_cache or tmp_path fixture"
    )
    raise StartupGuardError(
        f"{where}: {fault.path} is not under a folder the plugin owns for this test; its locks"
        f" are not faulted (the members would write over each other there). Allowed roots:"
        f" {allowed}"
    )


def _at(t: float, released_t: float | None) -> str:
    return f"{t - released_t:+.2f} s" if released_t is not None else f"t={t:.3f}"


def _who(take: LockTake) -> str:
    member = f"member {take.member}" if take.member is not None else "a process"
    return f"{member} (pid {take.pid})"


def _overlap_words(overlap: LockOverlap, released_t: float | None) -> str:
    return (
        f"{_who(overlap.first)} and {_who(overlap.second)} held {overlap.path} at once"
        f" ({overlap.first.how}, {overlap.second.how}) from {_at(overlap.t, released_t)}"
    )


def _shared_with(armed: ArmedLockFault, index: int) -> str:
    """Why member ``index`` failed, as far as the fault goes: with whom it held which lock."""
    for overlap in armed.overlaps:
        for mine, other in ((overlap.first, overlap.second), (overlap.second, overlap.first)):
            if mine.member == index and other.member != index:
                return (
                    f"{armed.fault.kind}: it held the lock {overlap.path} at the same time as"
                    f" {_who(other)} ({mine.how} locked nothing)"
                )
    return ""


def _takes_words(armed: ArmedLockFault, released_t: float | None) -> str:
    """Who locked what when, or that nobody did."""
    if not armed.takes:
        return (
            f"no process of the fleet called flock or lockf on {armed.fault.path}: do the servers"
            " lock a file there, and are their interpreters under the plugin?"
        )
    shown = []
    for take in armed.takes[:SHOWN_TAKES]:
        until = (
            f"released at {_at(take.released_t, released_t)}"
            if take.released_t is not None
            else "held to the end"
        )
        shown.append(
            f"{_who(take)}: {take.how} of {os.path.basename(take.path)} at"
            f" {_at(take.t, released_t)}, {until}"
        )
    more = len(armed.takes) - SHOWN_TAKES
    return "; ".join(shown) + (f" and {more} more" if more > 0 else "")


__all__ = [
    "FIRST_TAKER_WAIT",
    "ArmedLockFault",
    "LockFaults",
    "LockNotExclusive",
    "LockOverlap",
    "LockTake",
    "lock_not_exclusive",
    "split_lock_faults",
]
