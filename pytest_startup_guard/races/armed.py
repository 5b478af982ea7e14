"""An armed race: its windows, who held them open, and the accesses that hit them.

The window is a real change to the shared cache, seen by every process. It is opened and
closed from the test process only (the controller thread, the test's own thread, or the race
engine's timer), never by the process that triggered it, so a process killed inside its window
cannot leave a transient fault on disk for the others.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from pytest_startup_guard.races.base import Race, RaceTarget, Target, path_forms
from pytest_startup_guard.races.triggers import (
    After,
    Chaos,
    OnAccess,
    Placed,
    Trigger,
    default_hold,
)
from pytest_startup_guard.runtime.events import (
    LOOK_OPS,
    READ_OPS,
    AccessEvent,
)
from pytest_startup_guard.runtime.observation import unobserved
from pytest_startup_guard.runtime.own_time import HOLD_MAX_STRETCH, OwnClock

# The reads that list a folder: they meet a change of the names in it.
LISTING_OPS = tuple(op for op in READ_OPS if op != "open")


@dataclass
class Window:
    """One time the fault was on disk (monotonic seconds)."""

    opened_t: float
    closed_t: float | None = None
    opened_by: int | None = None  # the pid whose access opened it; None for a timer/refresher
    member: str | None = None

    @property
    def seconds(self) -> float | None:
        return None if self.closed_t is None else self.closed_t - self.opened_t


class Refresher(Protocol):
    """A process that opens and closes a race's window by itself (``chaos.ChaosRefresher``)."""

    def windows(self) -> list[Window]: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Hit:
    """An access of the code under test that met the change: of what the race changes
    (``Race.raced_files``), while a window was open."""

    pid: int
    member: str | None
    op: str
    path: str
    t: float
    window: int  # index into ArmedRace.windows
    # What the access found, in words: the race and the state it left (``ArmedRace.found_at``).
    found: str = ""


@dataclass
class _Holder:
    """What keeps a window open on behalf of one triggering process.

    The hold counts the triggering process's own time (``runtime/own_time.py``): on a busy
    machine, the time it waits for a CPU does not shorten the window it gets to meet the fault,
    up to ``HOLD_MAX_STRETCH`` x the hold in wall time. Nor does the time it is held at its accesses
    until the controller answers (``blocked``): on a busy machine the controller's thread waits
    for a CPU too, and a 20 ms hold would pass while the process waited for its reply.
    """

    until: float  # monotonic: the earliest the hold can be over (own time never runs ahead of wall)
    hold: float = 0.0
    clock: OwnClock | None = None  # None: a timer's window, in wall time
    accesses_left: int | None = None  # with on_access(accesses=N)
    blocked: Callable[[], float] | None = None  # seconds the process was held at its accesses
    blocked_at_start: float = 0.0
    # Ended by the wall-time cap (HOLD_MAX_STRETCH x the hold) before the process had the hold in
    # its own time: an access it was let go at may have run after the window closed.
    cut: bool = False

    def own(self, now: float) -> float:
        """The process's own time since the hold began, less the time held at its accesses."""
        assert self.clock is not None
        held = self.blocked() - self.blocked_at_start if self.blocked is not None else 0.0
        return max(0.0, self.clock.own(now) - held)

    def over(self, now: float) -> bool:
        """Whether the hold has passed; if not, ``until`` moves to the earliest it can."""
        if now < self.until:
            return False
        if self.clock is None:
            return True
        wall = now - self.clock.started
        own = self.own(now)
        if own >= self.hold:
            return True
        if wall >= self.hold * HOLD_MAX_STRETCH:
            self.cut = True
            return True
        self.until = min(now + (self.hold - own), self.clock.started + self.hold * HOLD_MAX_STRETCH)
        return False


@dataclass
class ArmedRace:
    race: Race
    target: Target
    trigger: Trigger
    allow_miss: bool = False
    windows: list[Window] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    accesses_seen: dict[int, int] = field(default_factory=dict)  # pid -> accesses counted
    armed_t: float = field(default_factory=time.monotonic)
    disarmed: bool = False
    # The controller's lock: held while windows open and close, so that no access is judged
    # half-way through a change.
    lock: AbstractContextManager[Any] = field(default_factory=nullcontext, repr=False)
    refresher: Refresher | None = field(default=None, repr=False)  # a chaos trigger's process
    # Seconds a pid was held at its accesses until the controller answered
    # (``RuntimeController.blocked_seconds``): not the process's own time.
    blocked_of: Callable[[int], float] = field(default=lambda pid: 0.0, repr=False)
    # What a race of a user's own that declares nothing changes, measured when it was armed
    # (``hubrace._measured_change``); None: the race's ``raced_files`` and ``is_hit`` say.
    measured: tuple[Path, ...] | None = None
    _holders: dict[int, _Holder] = field(default_factory=dict)  # pid (0: a timer) -> holder
    _watched: tuple[str, ...] = ()
    _cache_root: str = ""
    # What it changes, as given and with folders resolved (``path_forms``), and the folders
    # that hold them: found once, at the first access judged.
    _changed: dict[str, Path] | None = None  # each form -> the changed path it names
    _listed: frozenset[str] = frozenset()
    _clock_start: float | None = None  # after(): counts from here
    _found: dict[str, str] = field(default_factory=dict)  # path -> found_at(path), said once
    # pid -> the windows in which its hold was cut by the wall-time cap (``_Holder.cut``): its
    # hits there do not prove it met the change (a busy machine may have run its access late).
    cut_short: dict[int, set[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.trigger, OnAccess):  # no hold given: the race's window + margin
            self.trigger = self.trigger.for_window(self.race.window)
        self._watched = tuple(
            str(path).rstrip(os.sep) + os.sep for path in self.race.watched(self.target)
        )
        self._clock_start = self.armed_t
        self._cache_root = str(self.target.root).rstrip(os.sep) + os.sep
        # Every folder an access of which ``on_access`` acts on (each ends with os.sep).
        self._interest = (self._cache_root, *self._watched)

    # -- what users read -----------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.race.name or type(self.race).__name__

    @property
    def is_open(self) -> bool:
        return bool(self.windows) and self.windows[-1].closed_t is None

    def hit_pids(self) -> set[int]:
        return {hit.pid for hit in self.hits}

    def changed_files(self) -> tuple[Path, ...]:
        """What the race changes: measured where it was (a race of a user's own), else its
        ``raced_files``."""
        if self.measured is not None:
            return self.measured
        return self.race.raced_files(self.target)

    def meets_change(self, path: str, op: str | None = None) -> bool:
        """Whether an access of ``path`` meets what the race changes: its ``is_hit`` where the
        race says, else an access of one of ``changed_files`` (as given, or through a folder
        that is a symlink: those forms are found once, unobserved), or a listing of the folder
        that holds one where the race removes or adds a name (``Race.changes_names``)."""
        if op in LOOK_OPS and not self.race.looks_meet():
            # A rewrite in place keeps the name: a stat finds the file, and what is short or
            # empty is the content, which only a read meets (huggingface_hub's isfile goes on
            # to a read that may come after the window); a held flock no stat sees.
            return False
        changed = self._changed_forms()
        absolute = os.path.abspath(path)
        if op in LISTING_OPS and self.race.changes_names and absolute in self._listed:
            return True
        if self.measured is None and type(self.race).is_hit is not Race.is_hit:
            return self.race.is_hit(self.target, path)
        return absolute in changed

    def _changed_forms(self) -> dict[str, Path]:
        """Every form of what it changes (``path_forms``), each with the path it names, and
        the forms of the folders that hold it: found once, at the first access judged."""
        if self._changed is None:
            changed = self.changed_files()
            self._listed = frozenset(form for path in changed for form in path_forms(path.parent))
            self._changed = {form: path for path in changed for form in path_forms(path)}
        return self._changed

    def _raced_path_of(self, path: str) -> Path | None:
        """The changed path that an access of ``path`` reads (it, or anything under it)."""
        changed = self._changed_forms()
        absolute = os.path.abspath(path)
        if absolute in changed:
            return changed[absolute]
        return next(
            (raced for form, raced in changed.items() if absolute.startswith(form + os.sep)), None
        )

    def reads_raced_file(self, path: str) -> bool:
        """Whether an access of ``path`` reads the raced file (``Race.raced_files``: a hub
        file's pointer or blob, a path race's path or anything under it)."""
        return self._raced_path_of(path) is not None

    def changed_label(self) -> str:
        """What the race changes, for a message: a hub file by its name (``config.json``, its
        blob), the ref by its path in the repo (``refs/main``), a path as given."""
        target = self.target
        changed = self.changed_files()
        if isinstance(target, RaceTarget) and set(changed) == {target.pointer, target.blob}:
            return f"{target.filename} (its pointer or its blob)"
        names = [self._name_of(raced) for raced in changed]
        return " and ".join(names) if names else "what it changes"

    def _name_of(self, raced: Path) -> str:
        """One changed path in a message's words: a hub file by its name, its blob as such,
        a path under the race's folder relative to it, any other path as given."""
        target = self.target
        if isinstance(target, RaceTarget) and raced == target.pointer:
            return target.filename
        if isinstance(target, RaceTarget) and raced == target.blob:
            return f"the blob of {target.filename}"
        if raced.is_relative_to(target.folder):
            return str(raced.relative_to(target.folder))
        return str(raced)

    def found_at(self, path: str) -> str:
        """What an access of ``path`` found while a window was open, in words, with the race:
        ``pointer_swap: model.safetensors gone (its pointer removed, not yet re-created)``."""
        known = self._found.get(path)
        if known is not None:
            return known
        raced = self._raced_path_of(path)
        # None: a listing of the folder that holds it, or a race's own is_hit
        what = self.changed_label() if raced is None else self._name_of(raced)
        found = f"{self.name}: " + self.race.found.replace("{what}", what)
        self._found[path] = found
        return found

    def hit_members(self) -> set[str]:
        return {hit.member for hit in self.hits if hit.member is not None}

    def describe(self) -> str:
        return f"{self.name} on {self.target.label} with {self.trigger.describe()}"

    def __repr__(self) -> str:
        return f"<ArmedRace {self.describe()}: {len(self.windows)} windows, {len(self.hits)} hits>"

    # -- the engine (called with the controller's lock held) -----------------------------

    def watches(self, path: str) -> bool:
        """Under a watched folder, or the folder itself (a listing of it)."""
        return path.startswith(self._watched) or (path.rstrip(os.sep) + os.sep) in self._watched

    def _watched_path(self, event: AccessEvent) -> str | None:
        """The path of ``event`` this race watches (a rename's old name, else its new one)."""
        for path in event.paths():
            if self.watches(path):
                return path
        return None

    def in_cache(self, path: str) -> bool:
        return path.startswith(self._cache_root)

    def concerns(self, event: AccessEvent) -> bool:
        """Whether ``on_access`` has anything to do with ``event`` but expire the windows (the
        timer does that too): an access of the cache or a watched folder, or under one, by
        any of its paths (one prefix test each: every race hears every access)."""
        interest = self._interest
        return any((path + os.sep).startswith(interest) for path in event.paths())

    def on_access(self, event: AccessEvent) -> None:
        """Decide, before ``event`` proceeds, whether the window opens or closes for it, and
        whether it meets the change (a hit: an access of what the race changes, while a window
        is open; ``Race.is_hit``).

        With no ``nth`` each process's accesses of what the race changes are counted (its first
        opens the window); ``nth=N`` counts its accesses under the race's folders;
        ``accesses=N`` counts every access of the cache the process makes (``HF_HOME/token``
        included), because closing is about how far the process got, whatever it touched.
        """
        if self.disarmed or event.again:
            return  # an access asked again after a wait was judged when it was first made
        now = time.monotonic()
        # Judged as of when the process made the access, not when the controller got to it:
        # on a busy machine that can be later than the hold, and the access met the window.
        self.expire(min(now, event.t))
        look = event.op in LOOK_OPS  # meets the change, but is not counted as an access
        holder = self._holders.get(event.pid)
        if (
            holder is not None
            and holder.accesses_left is not None
            and not look
            and self.in_cache(event.path)
        ):
            if holder.accesses_left == 0:
                del self._holders[event.pid]  # this access must see the cache whole
                if not self._holders:
                    self.close(now)
            else:
                holder.accesses_left -= 1
        path = self._watched_path(event)
        if path is None:
            return
        # An access of what the race changes: by any of its paths (a rename onto the raced
        # file replaces it); the hit names the path that met it.
        met = next(
            (p for p in event.paths() if self.watches(p) and self.meets_change(p, event.op)),
            None,
        )
        meets = met is not None
        path = met if met is not None else path
        trigger = self.trigger
        if not isinstance(trigger, OnAccess) or (
            trigger.counts(event.op) and (meets if trigger.at_change else not look)
        ):
            count = self.accesses_seen.get(event.pid, 0) + 1
            self.accesses_seen[event.pid] = count
            if isinstance(trigger, OnAccess) and count == (trigger.nth or 1):
                self._hold(event.pid, event.member, now, trigger, reached=min(now, event.t))
        if self.is_open and meets:
            self.hits.append(
                Hit(
                    event.pid,
                    event.member,
                    event.op,
                    path,
                    event.t,
                    len(self.windows) - 1,
                    self.found_at(path),
                )
            )

    def _hold(
        self, pid: int, member: str | None, now: float, trigger: OnAccess, reached: float
    ) -> None:
        """Hold the window open for ``pid`` from ``reached``, when it made the access."""
        if trigger.accesses is not None:
            hold = trigger.max_hold
        else:
            hold = trigger.hold if trigger.hold is not None else default_hold(self.race.window)
        holder = _Holder(
            until=reached + hold,
            hold=hold,
            clock=OwnClock(pid, reached),
            blocked=partial(self.blocked_of, pid),
            blocked_at_start=self.blocked_of(pid),
        )
        if trigger.accesses is not None:
            holder.accesses_left = trigger.accesses - 1
        self._holders[pid] = holder
        if not self.is_open:
            self.open(now, pid, member)

    def _after_due_at(self) -> float | None:
        """When an ``after`` window that has not opened yet is due."""
        if isinstance(self.trigger, After) and not self.windows and self._clock_start is not None:
            return self._clock_start + self.trigger.seconds
        return None

    def next_deadline(self) -> float | None:
        """When the timer must look at this race again."""
        if self.disarmed:
            return None
        deadlines = [holder.until for holder in self._holders.values()]
        due = self._after_due_at()
        if due is not None:
            deadlines.append(due)
        return min(deadlines) if deadlines else None

    def expire(self, now: float) -> None:
        """Drop holders whose time has passed; open an ``after`` window that is due."""
        due = self._after_due_at()
        if due is not None and now >= due and isinstance(self.trigger, After):
            self._holders[0] = _Holder(until=now + self.trigger.hold)
            self.open(now, None, None)
        for pid in [pid for pid, holder in self._holders.items() if holder.over(now)]:
            if self._holders.pop(pid).cut and pid and self.windows:
                self.cut_short.setdefault(pid, set()).add(len(self.windows) - 1)
        if self.is_open and not self._holders and not isinstance(self.trigger, (Chaos, Placed)):
            self.close(now)

    def fleet_released(self, t: float) -> None:
        """``after`` counts from the fleet's release when the window has not opened yet."""
        if isinstance(self.trigger, After) and not self.windows:
            self._clock_start = t

    def process_gone(self, pid: int) -> None:
        """A triggering process that exited no longer holds an access-counted window."""
        holder = self._holders.get(pid)
        if holder is not None and holder.accesses_left is not None:
            del self._holders[pid]
            if not self._holders and self.is_open:
                self.close(time.monotonic())

    def open(self, now: float, pid: int | None, member: str | None) -> None:
        with unobserved():
            self.race.open(self.target)
        self.windows.append(Window(opened_t=now, opened_by=pid, member=member))

    def close(self, now: float) -> None:
        if not self.is_open:
            return
        with unobserved():
            self.race.close(self.target)
        self.windows[-1].closed_t = now

    def disarm(self) -> None:
        """Close any open window and stop reacting; the cache is whole afterwards."""
        if self.refresher is not None:
            self.refresher.stop()  # it closes its own window; what it left is closed below
        with self.lock:
            self._holders.clear()
            self.close(time.monotonic())
            if self.refresher is not None:
                with unobserved():
                    self.race.close(self.target)
            self.disarmed = True
