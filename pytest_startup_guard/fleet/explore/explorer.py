"""``server_fleet.explore``: race a file at every access point of a real fleet's start-up.

An access point is a process's nth access of the raced repo (what ``on_access(nth=n)`` counts,
so one point is the same moment in every process). The points are those of the busiest
process of a clean start-up. Each point is explored by a start-up whose window opens right
before that access and closes ``hold`` seconds later.

- **parallel** (the default): every member of a launch gets a private clone of the cache
  (``FakeHubCache.clone``: hard links) and a point of its own, so a launch of ``count``
  members explores ``count`` points and no member's window reaches another. The first launch's
  member 0 runs clean: it finds the points while the others explore the first ones; a last
  launch starts only as many members as it has points left.
- **sequential**: the whole fleet on the one cache, once clean and then once per point, for
  members that must share the cache (a lock between them, one of them downloading).

Every point is run. ``prune=True`` (opt-in) infers, instead of running, the points after which
no process touches what the race changes (``races/point_groups.py``: the one rule kept, and
what it assumes); each such point is reported "inferred, not run".

Points run in the order of the accesses, whatever the seed: the same start-up explores the same
points in the same order, and each point has the replay command of that point alone
(``--startup-guard-explore-point=N``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_startup_guard.cache.hubcache import CachedRepo, FakeHubCache
from pytest_startup_guard.checks import whole_number
from pytest_startup_guard.errors import InvalidArgumentError, StartupGuardError
from pytest_startup_guard.fleet.explore.request import ExploreRequest, check_mode, failure_line
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.launcher import FleetLauncher
from pytest_startup_guard.fleet.spec import LaunchSpec
from pytest_startup_guard.races.armed import ArmedRace
from pytest_startup_guard.races.base import Race, Target
from pytest_startup_guard.races.catalog import get_race
from pytest_startup_guard.races.changes import changed_paths
from pytest_startup_guard.races.exploration import (
    AccessPoint,
    Exploration,
    ExploreSettings,
    PointOutcome,
    checked_points,
    covered_outcome,
    outcome_of,
    wanted_points,
)
from pytest_startup_guard.races.hubrace import HubRace, busiest_process, target_of
from pytest_startup_guard.races.point_groups import PointGroup, group_points
from pytest_startup_guard.races.triggers import on_access
from pytest_startup_guard.runtime.events import (
    AccessEvent,
)

# Points a later launch of a parallel exploration runs when its first launch's members were
# forked from a warm template (else ``count``): the first launch finds how many points there
# are, and forked members cost a start-up's CPU but little memory of their own, so the rest of
# the points go in as few launches as this allows.
FORKED_POINTS_PER_LAUNCH = 16


@dataclass
class _Slot:
    """One member of a parallel launch: its clone of the cache, its point (None: clean)."""

    cache: FakeHubCache
    repo: CachedRepo
    point: int | None
    armed: ArmedRace | None = None


@dataclass(frozen=True)
class _Racing:
    """What every explored point races: the race, on which file, with which hold."""

    race: Race
    filename: str
    revision: str | None
    hold: float

    def target(self, repo: CachedRepo) -> Target:
        return target_of(self.race, repo, self.filename, self.revision)

    def arm(self, races: HubRace, repo: CachedRepo, number: int) -> ArmedRace:
        """The race on ``repo``, its window opening right before each process's access
        ``number`` (a run that never gets there says so: the point is "not reached")."""
        return races.arm(
            self.race,
            repo,
            self.filename,
            revision=self.revision,
            trigger=on_access(nth=number, hold=self.hold),
            allow_miss=True,
        )


@dataclass
class _Clean:
    """What a clean start-up showed: its points (the busiest process's accesses of the raced
    repo), each clean process's accesses that count towards ``nth``, and their looks."""

    points: list[AccessPoint]
    counted: dict[int, list[AccessEvent]]
    looks: list[AccessEvent]
    root: str  # the cache root the clean processes read


@dataclass
class _Run:
    """One exploration under way: its result so far, what it races, where, and which points."""

    exploration: Exploration
    racing: _Racing
    repo: CachedRepo
    wanted: list[int] | None  # None: every point found
    # What the race changes (relative to the cache root), with opt-in pruning; else None.
    changed: frozenset[str] | None = None
    groups: list[PointGroup] = field(default_factory=list)
    split: set[int] = field(default_factory=set)  # groups (by representative) run point by point
    outcomes: dict[int, PointOutcome] = field(default_factory=dict)  # the explored points

    def judged(self, outcome: PointOutcome) -> None:
        self.outcomes[outcome.point.number] = outcome
        self.exploration.points.append(outcome)

    def disagreeing(self) -> list[int]:
        """Points to explore after all: those of a group whose explored points ended in
        different ways (the grouping was wrong for it: every point of it is run)."""
        more = []
        for group in self.groups:
            ends = {self.outcomes[n].outcome for n in group.numbers if n in self.outcomes}
            if len(ends) > 1 and group.representative not in self.split:
                self.split.add(group.representative)
                more += [n for n in group.numbers if n not in self.outcomes]
        return more

    def infer(self, points: Sequence[AccessPoint], replay_of: Callable[[int], str]) -> None:
        """Opt-in pruning: every point of a group not run is inferred to end as the group's
        run point did, and says it was not run."""
        for group in self.groups:
            if group.representative in self.split:
                continue
            explored = self.outcomes[group.representative]
            for number in group.numbers:
                if number not in self.outcomes:
                    self.exploration.points.append(
                        covered_outcome(
                            points[number - 1], replay_of(number), explored, group.reason(number)
                        )
                    )


@dataclass
class Explorer:
    """One ``explore`` call: its launches, and the outcome of each point."""

    launcher: FleetLauncher
    races: HubRace
    settings: ExploreSettings
    folder: Path  # where each member's clone of the cache goes
    spec: LaunchSpec  # the fleet an exploration launches, as explore (or the case's launch) got it
    clean: Fleet | None = None  # the launch that ran clean (parallel: its member 0)

    @property
    def count(self) -> int:
        """Members per launch."""
        return self.spec.count

    # -- the two modes ---------------------------------------------------------------------

    def run(self, request: ExploreRequest) -> Exploration:
        """Explore the start-up as ``request`` asks; each of its arguments is checked first."""
        __tracebackhide__ = True
        where = "server_fleet.explore()"
        repo, mode, hold, prune = request.repo, request.mode, request.hold, request.prune
        instance = get_race(request.race, where=where)
        if instance.stale:
            raise StartupGuardError(
                f"{where} explores transient races; {instance.name!r} is a stale lock, in place"
                " for the whole start-up: use startup_races(stale=[...]) or hub_race.stale_lock()"
            )
        if not isinstance(repo, CachedRepo):
            raise TypeError(f"{where} needs a CachedRepo (hub_cache.add_model), not {repo!r}")
        checked_mode = check_mode(mode, where)
        whole_number(
            "count",
            self.count,
            where,
            minimum=1,
            meaning="in parallel mode, how many points a launch explores",
        )
        if not isinstance(prune, bool):
            raise InvalidArgumentError(
                f"invalid prune={prune!r} for {where}: expected False (run every point, the"
                " default) or True (infer the points after the last touch of what the race"
                " changes instead of running them)"
            )
        on_access(hold=hold)  # a bad hold: now, before any clone is made
        wanted = wanted_points(request.points, self.settings, where)
        if checked_mode == "sequential":  # parallel members race clones: any cache will do
            repo.cache.check_writable(repo, f"explore race {instance.name!r} on")
        racing = _Racing(instance, request.filename, request.revision, hold)
        target = racing.target(repo)  # a file the repo lacks: an error now
        exploration = Exploration(
            instance.name or type(instance).__name__, target.label, checked_mode, self.count
        )
        started = time.monotonic()
        try:
            run = _Run(exploration, racing, repo, wanted)
            self._plan_pruning(run, prune)
            if checked_mode == "parallel":
                self._parallel(run)
            else:
                self._sequential(run)
        finally:
            exploration.seconds = time.monotonic() - started
        return exploration

    def _plan_pruning(self, run: _Run, prune: bool) -> None:
        """With opt-in pruning, measure what the race changes (``run.changed``), or say why
        every point is run after all (``unpruned``). Without it every point is run."""
        exploration = run.exploration
        if not prune:
            exploration.unpruned = "every point is run (prune=True infers some instead)"
        elif self.settings.every_point:
            exploration.unpruned = "--startup-guard-explore-all"
        elif run.wanted is not None:
            exploration.unpruned = "only the points asked for were explored"
        else:
            run.changed = self._changes(run.racing, run.repo)
            if not run.changed:
                exploration.unpruned = (
                    "the race changes nothing a look at the cache can see, so every access"
                    " may differ"
                )

    def _changes(self, racing: _Racing, repo: CachedRepo) -> frozenset[str]:
        """What the race changes, relative to the cache root: measured on a scratch clone."""
        scratch = repo.cache.clone(self.folder / "changes")
        try:
            clone = scratch.repo(repo.repo_id, repo.revision, repo_type=repo.repo_type)
            return changed_paths(racing.race, racing.target(clone), scratch.root)
        finally:
            shutil.rmtree(scratch.root, ignore_errors=True)

    def _sequential(self, run: _Run) -> None:
        exploration, racing, repo, wanted = run.exploration, run.racing, run.repo, run.wanted
        target = racing.target(repo)
        self._watch(racing.race, target)
        before = self._marks()
        clean = self._launch(repo.cache)
        exploration.launches += 1
        exploration.startups += self.count
        self.clean = clean
        try:
            self._require_clean(clean, range(self.count))
            seen = self._clean(racing.race, target, clean, before, range(self.count))
            exploration.found = len(seen.points)
        finally:
            clean.stop()  # its cores and ports are for the launches that race
        pending = self._to_explore(run, seen, wanted, explored=())
        while pending:
            number = pending.pop(0)
            armed = racing.arm(self.races, repo, number)
            fleet = None
            try:
                fleet = self._launch(repo.cache)
                exploration.launches += 1
                exploration.startups += self.count
                run.judged(
                    self._judged(
                        seen.points[number - 1], fleet, range(self.count), armed, exploration
                    )
                )
            finally:
                self.races.discard(armed)
                if fleet is not None:
                    fleet.stop()
            if not pending:
                pending = run.disagreeing()
        self._finish(run, seen)

    def _parallel(self, run: _Run) -> None:
        exploration, racing, repo, wanted = run.exploration, run.racing, run.repo, run.wanted
        # Launch 1: member 0 clean, the others on the first points (guessed: 1, 2, ... until the
        # clean member says how many there are; a guess past the last point is dropped).
        pending = list(wanted) if wanted is not None else list(range(1, self.count))
        seen: _Clean | None = None
        per_launch = self.count
        while seen is None or pending:
            first = seen is None
            batch = pending[: self.count - 1] if first else pending[:per_launch]
            pending = pending[len(batch) :]
            slots = self._slots(
                racing,
                repo,
                batch,
                exploration.launches,
                clean=first,
                guess=first and wanted is None,
            )
            fleet = None
            try:
                before = self._marks()
                fleet = self._launch(None, slots)
                exploration.launches += 1
                exploration.startups += len(slots)
                if first:
                    self.clean = fleet
                    if fleet.forked:  # forks share the template's pages: many fit a launch
                        per_launch = max(self.count, FORKED_POINTS_PER_LAUNCH)
                    self._require_clean(fleet, [0])
                    target = racing.target(slots[0].repo)
                    seen = self._clean(racing.race, target, fleet, before, [0])
                    exploration.found = len(seen.points)
                    if wanted is None:
                        batch = [number for number in batch if number <= len(seen.points)]
                    pending = self._to_explore(run, seen, wanted, explored=batch)
                for index, slot in enumerate(slots):
                    if slot.point is None or slot.point not in batch:
                        continue
                    assert slot.armed is not None and seen is not None
                    run.judged(
                        self._judged(
                            seen.points[slot.point - 1], fleet, [index], slot.armed, exploration
                        )
                    )
            finally:
                for slot in slots:
                    if slot.armed is not None:
                        self.races.discard(slot.armed)
                if fleet is not None:
                    fleet.stop()
                for slot in slots:
                    shutil.rmtree(slot.cache.root, ignore_errors=True)
            if not pending:
                pending = run.disagreeing()
        assert seen is not None
        self._finish(run, seen)

    def _to_explore(
        self, run: _Run, seen: _Clean, wanted: list[int] | None, explored: Sequence[int]
    ) -> list[int]:
        """The points still to run once the clean start-up is known: those asked for, every
        point, or with opt-in pruning every point but the inert ones it infers
        (``races/point_groups.py``)."""
        if wanted is not None:
            return [n for n in checked_points(wanted, len(seen.points)) if n not in explored]
        if run.changed is None or not run.changed:
            return [n for n in range(1, len(seen.points) + 1) if n not in explored]
        changed = run.changed

        def touches(access: AccessEvent) -> bool:
            return any(
                path is not None and os.path.normpath(os.path.relpath(path, seen.root)) in changed
                for path in (access.path, access.other)
            )

        run.groups = group_points(
            seen.counted, seen.looks, touches, len(seen.points), explored=explored
        )
        return sorted({g.representative for g in run.groups if g.representative not in explored})

    def _finish(self, run: _Run, seen: _Clean) -> None:
        run.infer(
            seen.points,
            lambda number: self.settings.replay_of(number, "server_fleet.explore"),
        )
        run.exploration.points.sort(key=lambda outcome: outcome.point.number)

    # -- launches --------------------------------------------------------------------------

    def _slots(
        self,
        racing: _Racing,
        repo: CachedRepo,
        batch: list[int],
        launch: int,
        *,
        clean: bool,
        guess: bool,
    ) -> list[_Slot]:
        """A clone of the cache per member, each armed at its own point; with ``clean``, member
        0 runs clean; with ``guess`` (how many points there are is not known yet) every member
        is started, one a point may not have."""
        numbers: list[int | None] = [None] if clean else []
        numbers += batch
        if guess:
            numbers += [None] * (self.count - len(numbers))
        slots = []
        for index, number in enumerate(numbers):
            cache = repo.cache.clone(self.folder / f"launch-{launch}" / f"member-{index}")
            clone = cache.repo(repo.repo_id, repo.revision, repo_type=repo.repo_type)
            slot = _Slot(cache, clone, number)
            self.races.controller.watch(cache.root)
            if number is not None:
                slot.armed = racing.arm(self.races, clone, number)
            else:
                self._watch(racing.race, racing.target(clone))
            slots.append(slot)
        return slots

    def _launch(self, cache: FakeHubCache | None, slots: list[_Slot] | None = None) -> Fleet:
        """Launch the fleet (the spec's own variant: its ``native_accesses``, ``warm`` and the
        rest carried to every launch)."""
        member_env = [dict(slot.cache.env) for slot in slots] if slots else []
        return self.launcher.launch(
            replace(
                self.spec,
                count=len(slots) if slots else self.count,  # a last parallel launch: fewer
                cache=cache,
                member_env=tuple(member_env),
            )
        )

    def _marks(self) -> tuple[int, int]:
        """How many accesses and looks the controller has heard so far."""
        with self.races.controller.lock:
            return len(self.races.controller.accesses), len(self.races.controller.looks)

    def _watch(self, race: Race, target: Target) -> None:
        for folder in race.watched(target):
            self.races.controller.watch(folder)

    # -- reading a launch ------------------------------------------------------------------

    def _require_clean(self, fleet: Fleet, members: Sequence[int]) -> None:
        bad = [fleet.servers[i] for i in members if not fleet.servers[i].ready]
        if bad:
            raise StartupGuardError(
                "server_fleet.explore(): the start-up fails without any race, so there is nothing"
                " to explore:\n" + "\n".join(server.report() for server in bad)
            )

    def _clean(
        self,
        race: Race,
        target: Target,
        fleet: Fleet,
        before: tuple[int, int],
        members: Sequence[int],
    ) -> _Clean:
        """The access points of the clean members' busiest process, each clean process's
        accesses, and their looks."""
        watched = tuple(str(p).rstrip(os.sep) + os.sep for p in race.watched(target))
        pids: dict[int, str] = {}
        for index in members:
            server = fleet.servers[index]
            for pid in sorted(fleet.members_pids(server)):
                pids[pid] = (
                    f"server {index}" if pid == server.pid else f"server {index}, child pid {pid}"
                )
        with self.races.controller.lock:
            heard = self.races.controller.accesses[before[0] :]
            looks = [look for look in self.races.controller.looks[before[1] :] if look.pid in pids]
        clean = [a for a in heard if a.pid in pids and a.path.startswith(watched)]
        if not clean:
            raise StartupGuardError(
                f"server_fleet.explore(): the clean start-up never accessed {target.folder}, so"
                " there is no access point to race (does it read this repo? is its interpreter"
                " under the plugin?)"
            )
        busiest = busiest_process(clean)
        counted: dict[int, list[AccessEvent]] = {}
        for access in clean:
            counted.setdefault(access.pid, []).append(access)
        points = [
            AccessPoint(
                number, access.op, os.path.relpath(access.path, target.folder), pids[access.pid]
            )
            for number, access in enumerate(busiest, 1)
        ]
        return _Clean(points, counted, looks, str(target.root).rstrip(os.sep))

    def _judged(
        self,
        point: AccessPoint,
        fleet: Fleet,
        members: Sequence[int],
        armed: ArmedRace,
        exploration: Exploration,
    ) -> PointOutcome:
        servers = [fleet.servers[index] for index in members]
        hit = bool(armed.hits)
        failing = [server for server in servers if not server.ready]
        undecided = bool(failing) and all(server.state == "undecided" for server in failing)
        outcome = outcome_of(bool(armed.windows), bool(failing), undecided)
        failure = None
        if failing and outcome != "survived":
            failure = failure_line(next((s for s in failing if s.state != "undecided"), failing[0]))
        return PointOutcome(
            point,
            outcome,
            hit,
            exploration.launches,
            tuple(members),
            failure,
            self.settings.replay_of(point.number, "server_fleet.explore"),
            list(armed.hits),
        )


__all__ = ["Explorer"]
