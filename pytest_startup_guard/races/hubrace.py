"""``hub_race``: arm races on a test's private cache, and explore every access point of a start-up.

One ``HubRace`` per test. It listens to the child runtime's access events (every process of the
test, and the test process itself), runs a timer that closes windows when their hold has passed,
starts chaos refreshers, and at the end closes everything and reports races that never hit.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_startup_guard.cache.hubcache import CachedRepo
from pytest_startup_guard.checks import flag, function, text
from pytest_startup_guard.errors import ArgumentTypeError, StartupGuardError
from pytest_startup_guard.lifetimes import lives_for_its_test
from pytest_startup_guard.races.armed import ArmedRace, Hit, Window
from pytest_startup_guard.races.base import PathTarget, RaceTarget, Target
from pytest_startup_guard.races.catalog import RACES, Race, get_race
from pytest_startup_guard.races.changes import changed_paths
from pytest_startup_guard.races.exploration import (
    AccessPoint,
    Exploration,
    ExploreSettings,
    PointOutcome,
    checked_points,
    outcome_of,
    wanted_points,
)
from pytest_startup_guard.races.roots import PluginRoots
from pytest_startup_guard.races.triggers import (
    After,
    Chaos,
    OnAccess,
    Placed,
    Trigger,
    on_access,
    placed,
)
from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    AccessEvent,
    RuntimeListener,
)
from pytest_startup_guard.runtime.observation import set_unobserved
from pytest_startup_guard.settings.seeds import seed_for_test


@lives_for_its_test
class HubRace:
    """Arms transient races; see ``arm`` and ``explore``."""

    def __init__(
        self,
        controller: RuntimeController,
        seed: int = 0,
        roots: PluginRoots | None = None,
        explore_settings: ExploreSettings | None = None,
    ) -> None:
        self.controller = controller
        self.seed = seed
        self.roots = roots if roots is not None else PluginRoots()
        self.explore_settings = (
            explore_settings if explore_settings is not None else ExploreSettings()
        )
        self.armed: list[ArmedRace] = []
        self.explorations: list[Exploration] = []
        self._timer: threading.Thread | None = None
        self._wake = threading.Condition(controller.lock)
        self._closed = False
        self.last_release_t: float | None = None  # when a fleet of the test was last released
        controller.subscribe(_RaceEngine(self))

    # -- arming ------------------------------------------------------------------------------

    def arm(
        self,
        race: str | Race,
        repo: CachedRepo,
        filename: str,
        *,
        revision: str | None = None,
        trigger: Trigger | None = None,
        allow_miss: bool = False,
    ) -> ArmedRace:
        """Arm ``race`` (a name from ``RACES`` or a ``Race``) on ``filename`` of ``repo``.

        The default trigger is ``on_access()``: the window opens right before each process's
        first access of what the race changes (``Race.raced_files``); a hit is an access of it
        while a window is open. Unless ``allow_miss=True``, a race that no access ever hit
        fails the test at teardown: a race test that was never raced proves nothing.
        """
        where = "hub_race.arm()"
        other_files = "; to race any other file use hub_race.arm_path(race, path)"
        instance = _race_on_file(race, repo, filename, where, other_files)
        flag("allow_miss", allow_miss, where)
        repo.cache.check_writable(repo, f"arm race {instance.name!r} on")
        target = target_of(instance, repo, filename, revision)
        return self._arm(instance, target, trigger, allow_miss)

    def arm_path(
        self,
        race: str | Race,
        path: str | os.PathLike[str],
        *,
        trigger: Trigger | None = None,
        allow_miss: bool = False,
    ) -> ArmedRace:
        """Arm a generic race (``file_replace``, ``file_rewrite``, ``partial_write``,
        ``folder_move``) or a stale lock on ``path``: a file or folder under a root the plugin
        owns (``shared_dir``, a ``hub_cache``, the test's ``tmp_path``); anything else is
        refused. The default trigger is ``on_access()`` (``placed()`` for stale locks)."""
        instance = get_race(race, where="hub_race.arm_path()")
        flag("allow_miss", allow_miss, "hub_race.arm_path()")
        if not instance.on_paths:
            raise StartupGuardError(
                f"race {instance.name!r} races a hub repo's file: use hub_race.arm({instance.name!r},"
                " repo, filename); arm_path() takes the generic races and stale locks"
                f" ({', '.join(_path_races())})"
            )
        root_name, root, resolved = self.roots.check(path, f"hub_race.arm_path({instance.name!r})")
        target = PathTarget(path=resolved, root=root, root_name=root_name)
        return self._arm(instance, target, trigger, allow_miss)

    def stale_lock(
        self, path: str | os.PathLike[str], *, soft: bool = False, allow_miss: bool = False
    ) -> ArmedRace:
        """Leave a lock file at ``path`` as a process that died holding it would, until
        teardown: an ``O_EXCL`` file (torch ``FileBaton``), or with ``soft=True`` a filelock
        ``SoftFileLock`` of a killed holder. Same as ``arm_path("stale_lock", path)``."""
        flag("soft", soft, "hub_race.stale_lock()")
        return self.arm_path(
            "stale_soft_lock" if soft else "stale_lock", path, allow_miss=allow_miss
        )

    def _arm(
        self, instance: Race, target: Target, trigger: Trigger | None, allow_miss: bool
    ) -> ArmedRace:
        if trigger is None:
            trigger = placed() if instance.stale else on_access()
        if not isinstance(trigger, (OnAccess, After, Chaos, Placed)):
            raise ArgumentTypeError(
                f"invalid trigger={trigger!r} for hub_race.arm(): expected on_access(...),"
                " after(...), chaos(...) or placed() from pytest_startup_guard"
            )
        instance.check(target)
        self._watch(instance, target)
        refresher = None
        if isinstance(trigger, Chaos):
            from pytest_startup_guard.races.chaos import ChaosRefresher

            seed = trigger.seed
            if seed is None:
                seed = seed_for_test(self.seed, f"chaos-{len(self.armed)}")
            label = f"{instance.name} on {target.label} with {trigger.describe()}"
            refresher = ChaosRefresher(
                instance, target, trigger, seed, self.controller.folder, label
            )
        armed = ArmedRace(
            instance,
            target,
            trigger,
            allow_miss,
            lock=self.controller.lock,
            refresher=refresher,
            blocked_of=self.controller.blocked_seconds,
            measured=_measured_change(instance, target),
        )
        with self.controller.lock:
            if isinstance(trigger, Placed):  # in place now; a fault that cannot be placed is
                armed.open(time.monotonic(), None, None)  # an error, and is never armed
            self.armed.append(armed)
        if not isinstance(trigger, (Chaos, Placed)):
            self._ensure_timer()
        return armed

    def discard(self, armed: ArmedRace) -> None:
        """Disarm ``armed`` (the cache is whole afterwards) and forget it: its hits and
        windows no longer count for the test (an exploration's runs, once judged)."""
        armed.disarm()
        with self.controller.lock:
            if armed in self.armed:
                self.armed.remove(armed)

    def _watch(self, race: Race, target: Target) -> None:
        """Have every process report its accesses of the target's folders from now on."""
        if isinstance(target, RaceTarget) or target.repo is not None:
            self.controller.watch(target.root)
        else:
            for folder in race.watched(target):
                self.controller.watch(folder)
        self.controller.watch_test_process()

    # -- exploring -----------------------------------------------------------------------

    def explore(
        self,
        race: str | Race,
        repo: CachedRepo,
        filename: str,
        startup: Callable[[], object],
        hold: float = 0.5,
        *,
        points: Sequence[int] | None = None,
        revision: str | None = None,
    ) -> Exploration:
        """Run ``startup()`` once clean, recording its accesses of the repo, then once per
        access point with the window opening right before that access. ``startup`` runs in the
        test process; it may start processes of its own (their accesses count per process).
        ``points=[...]`` (or ``--startup-guard-explore-point=N``) explores only those."""
        __tracebackhide__ = True
        where = "hub_race.explore()"
        function(
            "startup", startup, where, "a callable that runs the start-up, such as lambda: load()"
        )
        instance = _race_on_file(race, repo, filename, where)
        repo.cache.check_writable(repo, f"explore race {instance.name!r} on")
        on_access(hold=hold)  # a bad hold: now, before the start-up runs
        wanted = wanted_points(points, self.explore_settings, where)
        target = target_of(instance, repo, filename, revision)
        exploration = Exploration(
            instance.name or type(instance).__name__, target.label, "in-process"
        )
        started = time.monotonic()
        try:
            found = self._access_points(instance, target, startup)
            exploration.launches, exploration.found = 1, len(found)
            for number in checked_points(wanted, len(found)):
                armed = self.arm(
                    instance,
                    repo,
                    filename,
                    revision=revision,
                    trigger=on_access(nth=number, hold=hold),
                    allow_miss=True,  # a run that never reaches its point says so: not reached
                )
                exploration.launches += 1
                exploration.startups += 1
                exploration.points.append(
                    self._run_point(found[number - 1], armed, startup, exploration.launches)
                )
        finally:
            exploration.seconds = time.monotonic() - started
        self.explorations.append(exploration)
        return exploration

    def _access_points(
        self, race: Race, target: Target, startup: Callable[[], object]
    ) -> list[AccessPoint]:
        """Run ``startup()`` without a race; its access points (those of its busiest process)."""
        watched = tuple(str(path).rstrip(os.sep) + os.sep for path in race.watched(target))
        self._watch(race, target)
        start = len(self.controller.accesses)
        try:
            startup()
        except Exception as error:
            raise StartupGuardError(
                f"explore(): the start-up fails without any race, so there is nothing to explore:"
                f" {type(error).__name__}: {error}"
            ) from error
        with self.controller.lock:
            clean = [a for a in self.controller.accesses[start:] if a.path.startswith(watched)]
        if not clean:
            raise StartupGuardError(
                f"hub_race.explore(): the clean start-up never accessed {target.folder}, so there"
                " is no access point to race (does it read this repo?)"
            )
        return [
            AccessPoint(
                number,
                access.op,
                os.path.relpath(access.path, target.folder),
                "test process" if access.pid == os.getpid() else f"child pid {access.pid}",
            )
            for number, access in enumerate(busiest_process(clean), 1)
        ]

    def _run_point(
        self, point: AccessPoint, armed: ArmedRace, startup: Callable[[], object], run: int
    ) -> PointOutcome:
        """Run ``startup()`` under ``armed``, then take the race away; judge the point."""
        error: str | None = None
        try:
            startup()
        except Exception as raised:
            error = _first_line(raised)
        finally:
            self.discard(armed)
        return PointOutcome(
            point,
            outcome_of(bool(armed.windows), error is not None),
            bool(armed.hits),
            run,
            (),
            error,
            self.explore_settings.replay_of(point.number, "hub_race.explore"),
            list(armed.hits),
        )

    # -- reading -------------------------------------------------------------------------

    @property
    def hits(self) -> list[Hit]:
        """Every access that fell into an open window, of every armed race."""
        self._sync_chaos()  # chaos windows live in the refreshers' logs until read
        with self.controller.lock:
            return [hit for armed in self.armed for hit in armed.hits]

    # -- the engine ----------------------------------------------------------------------

    def wake(self) -> None:
        """Wake the timer: a window opened, or a deadline moved (the controller's lock held)."""
        self._wake.notify_all()

    def _ensure_timer(self) -> None:
        """Start the timer that closes windows once, and wake it for a new deadline."""
        if self._timer is None:
            self._timer = threading.Thread(
                target=self._run_timer, name="startup-guard-races", daemon=True
            )
            self._timer.start()
        with self._wake:
            self._wake.notify_all()

    def _run_timer(self) -> None:
        """Close each window when its hold has passed, sleeping until the next deadline.

        Not while an access is in flight (``RuntimeController.in_flight``): one made before
        the hold passed must meet the window, however late the controller's thread gets to it
        on a busy machine; the close waits for it, ``MAX_POSTPONE`` seconds at most."""
        set_unobserved(True)  # the windows it closes are the plugin's own file operations
        postponed_since: float | None = None
        with self._wake:
            while not self._closed:
                now = time.monotonic()
                due = [d for d in (a.next_deadline() for a in self.armed) if d is not None]
                if due and min(due) <= now and self.controller.in_flight():
                    postponed_since = now if postponed_since is None else postponed_since
                    if now - postponed_since < MAX_POSTPONE:
                        self._wake.wait(POSTPONE_STEP)  # lets the controller's thread handle it
                        continue
                postponed_since = None
                for armed in self.armed:
                    if not isinstance(armed.trigger, Chaos):
                        try:
                            armed.expire(now)
                        except Exception as error:  # a race that cannot close is a test error
                            self.controller.errors.append(f"closing {armed.describe()}: {error!r}")
                            armed.disarmed = True
                deadlines = [d for d in (a.next_deadline() for a in self.armed) if d is not None]
                timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                self._wake.wait(timeout)

    def _sync_chaos(self) -> None:
        """Chaos windows are logged by the refresher; hits are the accesses that met one: a
        process reports an access and waits for the controller's answer before its operation
        runs, so an access met a window that was open at any moment from its report to that
        answer (a window the refresher opened during the round trip included)."""
        for armed in self.armed:
            if armed.refresher is None:
                continue
            windows = armed.refresher.windows()
            with self.controller.lock:  # answered_at takes the same (reentrant) lock
                armed.windows = windows
                armed.hits = [
                    Hit(a.pid, a.member, a.op, a.path, a.t, index, armed.found_at(a.path))
                    for a in [*self.controller.accesses, *self.controller.looks]
                    if armed.watches(a.path) and armed.meets_change(a.path, a.op)
                    for index in _window_over(windows, a.t, self.controller.answered_at(a))
                ]

    # -- the end -------------------------------------------------------------------------

    def close(self) -> list[str]:
        """Stop refreshers and the timer, close every window (the cache is whole afterwards),
        and return a message for every armed race that no access hit."""
        if self._closed:
            return []
        for armed in self.armed:
            if armed.refresher is not None:
                armed.disarm()  # its process stops; its windows are read just below
        self._sync_chaos()
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        if self._timer is not None:
            self._timer.join(timeout=5)
        problems = []
        with self.controller.lock:
            for armed in self.armed:
                try:
                    armed.disarm()
                    armed.race.close(armed.target)  # whatever a refresher left: whole again
                except Exception as error:
                    problems.append(f"could not close {armed.describe()}: {error!r}")
                if not armed.hits and not armed.allow_miss:
                    problems.append(self._miss_message(armed))
        return problems

    def _miss_message(self, armed: ArmedRace) -> str:
        """Why ``armed`` never hit, with each process's count of accesses, and the opt-out."""
        folder = armed.target.folder.name
        counts = []
        for pid, count in armed.accesses_seen.items():
            record = self.controller.processes.get(pid)
            who = "test process" if record is None else (record.member or "no fleet member")
            counts.append(f"pid {pid} ({who}): {count}")
        changed = armed.changed_label()
        at_change = isinstance(armed.trigger, OnAccess) and armed.trigger.at_change
        counted = changed if at_change else folder
        if not armed.windows:
            if not counts:
                why = f"its window never opened: no process accessed {counted}"
            else:
                nth = armed.trigger.nth if isinstance(armed.trigger, OnAccess) else None
                why = (
                    f"its window never opened: no process made {nth} accesses of {folder}"
                    if nth is not None
                    else "its window never opened"
                ) + f" (accesses of {counted} per process: {', '.join(counts)})"
        else:
            why = (
                f"its window opened {len(armed.windows)} time(s), but nothing accessed"
                f" {changed} while it was open"
            )
        late = self.last_release_t is not None and self.last_release_t < armed.armed_t
        order = (
            " It was armed after the test's last server_fleet.launch() had released its fleet:"
            " arm a race before the launch whose start-up should meet it."
            if late
            else ""
        )
        return (
            f"race {armed.describe()} never hit: {why}.{order} A race that never hit proves"
            " nothing; if the code under test may legitimately not read this file, arm it with"
            " allow_miss=True."
        )


def _measured_change(race: Race, target: Target) -> tuple[Path, ...] | None:
    """What a race of a user's own that declares nothing (no ``raced_files``, no ``is_hit``)
    changes on a hub repo, measured on a scratch clone of its cache (``changes.py``), as paths
    of the real cache; None for every other race (it declares what it changes)."""
    if not isinstance(target, RaceTarget) or type(race).raced_files is not Race.raced_files:
        return None
    if type(race).is_hit is not Race.is_hit:
        return None
    cache = target.repo.cache
    scratch_root = cache.root.with_name(f"{cache.root.name}.changes-{os.getpid()}")
    shutil.rmtree(scratch_root, ignore_errors=True)
    try:
        scratch = cache.clone(scratch_root)
        repo = scratch.repo(
            target.repo.repo_id, target.repo.revision, repo_type=target.repo.repo_type
        )
        relative = changed_paths(
            race, target_of(race, repo, target.filename, target.revision), scratch_root
        )
    finally:
        shutil.rmtree(scratch_root, ignore_errors=True)
    return tuple(sorted(cache.root / path for path in relative))


# How long the timer waits for an access in flight before it closes a window anyway, and how
# often it looks again: an access is handled in well under a millisecond on an idle machine.
MAX_POSTPONE = 0.5
POSTPONE_STEP = 0.001


class _RaceEngine(RuntimeListener):
    """What the armed races of one ``HubRace`` hear from the child runtime: its looks too (a
    look of what a race changes meets the change)."""

    hears_looks = True

    def __init__(self, races: HubRace) -> None:
        self.races = races

    def on_access(self, event: AccessEvent) -> None:
        """An access may open, hit or close a window; wake the timer when a deadline moved.

        A race hears only the accesses under its cache or the folders it watches: to any other
        access it has nothing to say (``ArmedRace.concerns``), and its windows close on its own
        accesses and on the timer. An exploration arms a race per member, each on a clone of
        the cache of its own, so every access would otherwise be judged by every member's race.
        """
        moved = False
        for armed in self.races.armed:
            if isinstance(armed.trigger, Chaos) or not armed.concerns(event):
                continue
            before = armed.next_deadline(), len(armed.windows), armed.is_open
            armed.on_access(event)
            moved = moved or before != (armed.next_deadline(), len(armed.windows), armed.is_open)
        if moved:
            self.races.wake()

    def on_release(self, t: float) -> None:
        """A fleet's release starts the clock of ``after(...)`` triggers."""
        self.races.last_release_t = t
        for armed in self.races.armed:
            armed.fleet_released(t)
        self.races.wake()

    def on_gone(self, pid: int) -> None:
        """A process that is gone no longer holds an access-counted window open."""
        for armed in self.races.armed:
            armed.process_gone(pid)


def _race_on_file(
    race: str | Race, repo: object, filename: object, where: str, hint: str = ""
) -> Race:
    """The race ``arm``/``explore`` were given, once ``repo`` is a ``CachedRepo`` and
    ``filename`` a name (``hint`` ends the message of a repo that is not)."""
    instance = get_race(race, where=where)
    if not isinstance(repo, CachedRepo):
        raise ArgumentTypeError(
            f"{where} needs a CachedRepo (what hub_cache.add_model returns), not"
            f" {type(repo).__name__}{hint}"
        )
    text("filename", filename, where, meaning="a file of the repo, such as 'config.json'")
    return instance


def target_of(race: Race, repo: CachedRepo, filename: str, revision: str | None) -> Target:
    """A hub race's target, or for a generic race the path of the repo's file (its pointer)."""
    target = RaceTarget.of(repo, filename, revision)
    if not race.on_paths:
        return target
    return PathTarget(
        path=target.lock
        if race.stale
        else target.pointer,  # a stale lock: the blob's download lock
        root=repo.cache.root,
        root_name="hub_cache",
        repo=repo,
        filename=filename,
        revision=target.revision,
    )


def _path_races() -> list[str]:
    return [name for name, race in RACES.items() if race.on_paths]


def busiest_process(accesses: list[AccessEvent]) -> list[AccessEvent]:
    """The accesses of the process that made the most of them.

    ``on_access(nth=...)`` counts each process's accesses on its own: there are as many points
    to open a window at as the busiest process makes accesses.
    """
    per_process: dict[int, list[AccessEvent]] = {}
    for access in accesses:
        per_process.setdefault(access.pid, []).append(access)
    return max(per_process.values(), key=len) if per_process else []


def _first_line(error: Exception) -> str:
    """``ValueError: the first line of its message``, for one row of an exploration."""
    message = str(error).strip()
    return f"{type(error).__name__}: {message.splitlines()[0] if message else ''}"


def _window_over(windows: list[Window], start: float, end: float) -> list[int]:
    """The index of the first window open at some moment from ``start`` to ``end`` (as a list:
    none, or one)."""
    for index, window in enumerate(windows):
        closed = window.closed_t if window.closed_t is not None else end
        if window.opened_t <= end and start <= closed:
            return [index]
    return []
