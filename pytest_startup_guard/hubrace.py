"""``hub_race``: arm races on a test's private cache, and explore every access point of a start-up.

One ``HubRace`` per test. It listens to the child runtime's access events (every process of the
test, and the test process itself), runs a timer that closes windows when their hold has passed,
starts chaos refreshers, and at the end closes everything and reports races that never hit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pytest_startup_guard.armed import ArmedRace, Hit, Window
from pytest_startup_guard.controller import AccessEvent, RuntimeController
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.hubcache import CachedRepo
from pytest_startup_guard.protocol import PLAN_ENV
from pytest_startup_guard.races import Race, RaceTarget, get_race
from pytest_startup_guard.seeds import seed_for_test
from pytest_startup_guard.triggers import After, Chaos, OnAccess, Trigger, on_access


@dataclass
class _Refresher:
    process: subprocess.Popen[bytes]
    log: Path
    stdin: IO[bytes]


@dataclass(frozen=True)
class ExplorationPoint:
    index: int  # the nth access the window opened at
    op: str
    path: str  # relative to the repo folder
    outcome: str  # "survived" or "failed"
    error: str | None
    hit: bool


@dataclass
class Exploration:
    """One start-up run once per access point, with the window opening right before it."""

    race: str
    target: str
    points: list[ExplorationPoint] = field(default_factory=list)

    @property
    def failed(self) -> list[ExplorationPoint]:
        return [point for point in self.points if point.outcome == "failed"]

    @property
    def survived(self) -> list[ExplorationPoint]:
        return [point for point in self.points if point.outcome == "survived"]

    def __str__(self) -> str:
        lines = [f"explore {self.race} on {self.target}: {len(self.points)} access points"]
        for point in self.points:
            error = f"  {point.error}" if point.error else ""
            lines.append(
                f"  #{point.index:<3} {point.op:<11} {point.path:<60} {point.outcome}{error}"
            )
        return "\n".join(lines)


class HubRace:
    """Arms transient races; see ``arm`` and ``explore``."""

    def __init__(self, controller: RuntimeController, seed: int = 0) -> None:
        self.controller = controller
        self.seed = seed
        self.armed: list[ArmedRace] = []
        self.explorations: list[Exploration] = []
        self._refreshers: dict[int, _Refresher] = {}
        self._timer: threading.Thread | None = None
        self._wake = threading.Condition(controller.lock)
        self._closed = False
        controller.add_listener(self._on_access)
        controller.add_release_listener(self._on_release)
        controller.add_gone_listener(self._on_gone)

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
        first access of the repo. Unless ``allow_miss=True``, a race that no access ever hit
        fails the test at teardown: a race test that was never raced proves nothing.
        """
        instance = get_race(race, where="hub_race.arm()")
        if not isinstance(repo, CachedRepo):
            raise TypeError(
                f"hub_race.arm() needs a CachedRepo (what hub_cache.add_model returns), not {type(repo).__name__}"
            )
        repo.cache.check_writable(repo, f"arm race {instance.name!r} on")
        trigger = on_access() if trigger is None else trigger
        if not isinstance(trigger, (OnAccess, After, Chaos)):
            raise TypeError(
                f"invalid trigger {trigger!r}: expected on_access(...), after(...) or chaos(...)"
            )
        armed = ArmedRace(instance, RaceTarget.of(repo, filename, revision), trigger, allow_miss)
        armed.lock = self.controller.lock
        self.controller.watch(repo.cache.root)
        self.controller.watch_test_process()
        with self.controller.lock:
            self.armed.append(armed)
        if isinstance(trigger, Chaos):
            self._start_refresher(armed, trigger)
        else:
            self._ensure_timer()
        return armed

    # -- exploring -----------------------------------------------------------------------

    def explore(
        self,
        race: str | Race,
        repo: CachedRepo,
        filename: str,
        startup: Callable[[], object],
        hold: float = 0.5,
        *,
        revision: str | None = None,
    ) -> Exploration:
        """Run ``startup()`` once clean, recording its accesses of the repo, then once per
        access point with the window opening right before that access. ``startup`` runs in the
        test process; it may start processes of its own (their accesses count per process)."""
        if not callable(startup):
            raise TypeError(f"explore() needs a callable start-up, not {type(startup).__name__}")
        instance = get_race(race, where="hub_race.explore()")
        repo.cache.check_writable(repo, f"explore race {instance.name!r} on")
        target = RaceTarget.of(repo, filename, revision)
        watched = tuple(str(path).rstrip(os.sep) + os.sep for path in instance.watched(target))
        self.controller.watch(repo.cache.root)
        self.controller.watch_test_process()
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
        per_process: dict[int, list[AccessEvent]] = {}
        for access in clean:
            per_process.setdefault(access.pid, []).append(access)
        points = max(per_process.values(), key=len) if per_process else []
        exploration = Exploration(instance.name or type(instance).__name__, target.label)
        for index, access in enumerate(points, 1):
            armed = self.arm(
                instance,
                repo,
                filename,
                revision=revision,
                trigger=on_access(nth=index, hold=hold),
                allow_miss=True,
            )
            error_text = None
            try:
                startup()
                outcome = "survived"
            except Exception as error:
                outcome = "failed"
                error_text = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            finally:
                armed.disarm()
                with self.controller.lock:
                    self.armed.remove(armed)
            exploration.points.append(
                ExplorationPoint(
                    index=index,
                    op=access.op,
                    path=os.path.relpath(access.path, repo.path),
                    outcome=outcome,
                    error=error_text,
                    hit=bool(armed.hits),
                )
            )
        self.explorations.append(exploration)
        return exploration

    # -- reading -------------------------------------------------------------------------

    @property
    def hits(self) -> list[Hit]:
        self._sync_chaos()
        with self.controller.lock:
            return [hit for armed in self.armed for hit in armed.hits]

    # -- the engine ----------------------------------------------------------------------

    def _on_access(self, event: AccessEvent) -> None:
        for armed in self.armed:
            if not isinstance(armed.trigger, Chaos):
                armed.on_access(event)
        self._wake.notify_all()

    def _on_release(self, t: float) -> None:
        for armed in self.armed:
            armed.fleet_released(t)
        self._wake.notify_all()

    def _on_gone(self, pid: int) -> None:
        for armed in self.armed:
            armed.process_gone(pid)

    def _ensure_timer(self) -> None:
        if self._timer is None:
            self._timer = threading.Thread(
                target=self._run_timer, name="startup-guard-races", daemon=True
            )
            self._timer.start()
        with self._wake:
            self._wake.notify_all()

    def _run_timer(self) -> None:
        with self._wake:
            while not self._closed:
                now = time.monotonic()
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

    def _start_refresher(self, armed: ArmedRace, trigger: Chaos) -> None:
        from pytest_startup_guard.refresher import RefresherSpec, dump

        seed = (
            trigger.seed
            if trigger.seed is not None
            else seed_for_test(self.seed, f"chaos-{len(self.armed)}")
        )
        log = Path(
            tempfile.mkstemp(prefix="refresher-", suffix=".log", dir=self.controller.folder)[1]
        )
        env = {key: value for key, value in os.environ.items() if key != PLAN_ENV}  # not under test
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest_startup_guard.refresher"],
            stdin=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert process.stdin is not None
        spec = RefresherSpec(armed.race, armed.target, trigger.gap, trigger.hold, seed, str(log))
        dump(spec, process.stdin)
        self._refreshers[id(armed)] = _Refresher(process, log, process.stdin)
        armed.stop_refresher = lambda: self._stop_refresher(armed)
        deadline = time.monotonic() + 30
        while "ready" not in log.read_text() and time.monotonic() < deadline:
            if process.poll() is not None:
                raise StartupGuardError(
                    f"the chaos refresher for {armed.describe()} exited with code"
                    f" {process.returncode} before it started (is the race class importable?)"
                )
            time.sleep(0.005)

    def _sync_chaos(self) -> None:
        """Chaos windows are logged by the refresher; hits are the accesses inside them."""
        for armed in self.armed:
            refresher = self._refreshers.get(id(armed))
            if refresher is None:
                continue
            windows = []
            for line in refresher.log.read_text().splitlines():
                parts = line.split()
                if parts and parts[0] == "window" and len(parts) == 3:
                    windows.append(Window(float(parts[1]), float(parts[2])))
            with self.controller.lock:
                armed.windows = windows
                armed.hits = [
                    Hit(a.pid, a.member, a.op, a.path, a.t, index)
                    for a in self.controller.accesses
                    if armed.watches(a.path) and armed.race.is_hit(armed.target, a.path)
                    for index in _window_at(windows, a.t)
                ]

    def _stop_refresher(self, armed: ArmedRace) -> None:
        """Stop one chaos refresher, take in its windows, and make the cache whole."""
        refresher = self._refreshers.get(id(armed))
        if refresher is None or refresher.process.returncode is not None:
            return
        try:
            refresher.stdin.write(b"x")
            refresher.stdin.close()
        except OSError:
            pass
        try:
            refresher.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            refresher.process.kill()
            refresher.process.wait()
        self._sync_chaos()
        with self.controller.lock:
            armed.race.close(armed.target)

    # -- the end -------------------------------------------------------------------------

    def close(self) -> list[str]:
        """Stop refreshers and the timer, close every window (the cache is whole afterwards),
        and return a message for every armed race that no access hit."""
        if self._closed:
            return []
        for armed in self.armed:
            if armed.stop_refresher is not None:
                armed.disarm()
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
        folder = armed.target.repo.path.name
        counts = []
        for pid, count in armed.accesses_seen.items():
            record = self.controller.processes.get(pid)
            who = "test process" if record is None else (record.member or "no fleet member")
            counts.append(f"pid {pid} ({who}): {count}")
        if not armed.windows:
            if not counts:
                why = f"its window never opened: no process accessed {folder}"
            else:
                nth = armed.trigger.nth if isinstance(armed.trigger, OnAccess) else None
                why = (
                    f"its window never opened: no process made {nth} accesses of {folder}"
                    if nth is not None
                    else "its window never opened"
                ) + f" (accesses per process: {', '.join(counts)})"
        else:
            why = f"its window opened {len(armed.windows)} time(s), but nothing accessed {folder} while it was open"
        return (
            f"race {armed.describe()} never hit: {why}. A race that never hit proves nothing; if the"
            " code under test may legitimately not read this file, arm it with allow_miss=True."
        )


def _window_at(windows: list[Window], t: float) -> list[int]:
    for index, window in enumerate(windows):
        if window.opened_t <= t <= (window.closed_t if window.closed_t is not None else t):
            return [index]
    return []
