"""What an exploration found: the access points of a start-up and how each raced run fared.

One model for both ways to explore: ``hub_race.explore`` (a start-up written as a callable in
the test process) and ``server_fleet.explore`` (a fleet of real servers). ``AccessPoint`` is a
process's nth access of the raced repo, ``PointOutcome`` one point's run, ``Exploration`` all of
them with ``assert_all_survived``. A point is *survived* only when its window opened, the access
met it, and the start-up came through: a run that never made the access proves nothing, and is
*not reached*, in both ways.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pytest_startup_guard.checks import whole_number
from pytest_startup_guard.errors import InvalidArgumentError, StartupGuardError
from pytest_startup_guard.outcomes import INFERRED, OUTCOMES, UNDECIDED_MARK, Outcome, Problem
from pytest_startup_guard.races.armed import Hit

Mode = Literal["in-process", "parallel", "sequential"]
FLEET_MODES: tuple[Mode, ...] = ("parallel", "sequential")
NOT_REACHED = "its run never made this access, so the point proves nothing"
_COMMIT = re.compile(r"\b[0-9a-f]{40}\b")


@dataclass(frozen=True)
class ExploreSettings:
    """What the run says about exploring: the one point to explore, and how to replay one.

    ``replay_point`` is the command that replays one point of this test, up to the point's
    number (``pytest ... --startup-guard-explore-point=``). Outside a pytest run there is no
    command: a point's replay is then the call with ``points=[N]``.
    """

    only_point: int | None = None  # --startup-guard-explore-point: explore only this point
    replay_point: str | None = None
    every_point: bool = False  # --startup-guard-explore-all: no point is covered by another

    def replay_of(self, number: int, call: str) -> str:
        """The command that replays point ``number`` alone (``call`` names the API used)."""
        if self.replay_point is None:
            return f"{call}(..., points=[{number}])"
        return f"{self.replay_point}{number}"


@dataclass(frozen=True)
class AccessPoint:
    """The nth access of a process of the clean start-up: what it did, and to which file."""

    number: int
    op: str  # open, os.listdir, os.scandir
    path: str  # relative to the repo's folder
    process: str  # who made it in the clean start-up: "server 0", "test process", ...

    @property
    def short_path(self) -> str:
        """``path`` with a commit shortened: ``snapshots/5f6c588/config.json``."""
        return _COMMIT.sub(lambda match: match.group(0)[:7], self.path)


@dataclass
class PointOutcome:
    """How the start-up fared with the window opening right before one access point."""

    point: AccessPoint
    outcome: Outcome
    hit: bool  # an access of what the race changes met its window
    launch: int  # which run of the exploration raced it (1-based)
    members: tuple[int, ...]  # the fleet members that carried it (() in the test process)
    failure: str | None  # what failed: a member's status or the exception, and its first line
    replay: str
    hits: list[Hit] = field(default_factory=list)  # the accesses that met its window
    # Inferred, not run (opt-in pruning only: ``races/point_groups.py``): it is taken to end
    # as point ``covered_by`` did, which was run, for the reason ``covered``; its outcome,
    # failure and launch are that point's.
    covered_by: int | None = None
    covered: str | None = None

    @property
    def inferred(self) -> bool:
        """Whether this point was not run, its outcome inferred from another's."""
        return self.covered_by is not None

    def problem(self) -> str:
        """One line for a point that was not survived: the access, what became of it, why,
        and the command that replays it (a ``startup_case`` check lists these)."""
        return str(self.as_problem())

    def as_problem(self) -> Problem:
        """``problem()``, carrying whether it is undecided or failed (not reached is failed:
        a case that never met the race proves nothing)."""
        point = self.point
        what = f"access point #{point.number} ({point.op} {point.short_path}): {self.outcome}"
        if self.covered_by is not None:
            what += f" ({INFERRED} as #{self.covered_by}: {self.covered})"
        if self.failure:
            what += f": {self.failure}"
        if self.outcome == "not reached":
            what += f": {NOT_REACHED}"
        line = f"{what}; replay: {self.replay}"
        return Problem.undecided(line) if self.outcome == "undecided" else Problem(line)

    def line(self) -> str:
        point = self.point
        head = f"  #{point.number:<3} {point.op:<11} {point.short_path:<40} {self.outcome}"
        if self.covered_by is not None:
            head += f"  ({INFERRED}: as #{self.covered_by})"
        return head + (f"  {self.failure}" if self.failure else "")


def covered_outcome(point: AccessPoint, replay: str, by: PointOutcome, reason: str) -> PointOutcome:
    """``point``, not explored, ending as the explored point ``by`` did, for ``reason``."""
    return PointOutcome(
        point,
        by.outcome,
        by.hit,
        by.launch,
        by.members,
        by.failure,
        replay,
        covered_by=by.point.number,
        covered=reason,
    )


@dataclass
class Exploration:
    """Every access point of a start-up, raced one at a time: ``points``, ``mode``."""

    race: str
    target: str
    mode: Mode
    count: int = 1  # fleet members per launch (1 in the test process)
    points: list[PointOutcome] = field(default_factory=list)
    launches: int = 0  # start-ups run, the clean one included
    seconds: float = 0.0
    found: int = 0  # access points of the clean start-up's busiest process
    startups: int = 0  # start-ups run (fleet members started), the clean one included
    # Why every point was explored rather than one per group of equivalent points (None: the
    # points were grouped, or the exploration does not group them: in-process).
    unpruned: str | None = None

    @property
    def explored(self) -> list[PointOutcome]:
        """The points that were run (every point, unless ``prune=True`` inferred some)."""
        return [point for point in self.points if not point.inferred]

    @property
    def inferred(self) -> list[PointOutcome]:
        """The points that were not run (opt-in pruning): each is taken to end as the run
        point it names."""
        return [point for point in self.points if point.inferred]

    @property
    def covered(self) -> list[PointOutcome]:
        """``inferred``, by its older name."""
        return self.inferred

    def of(self, outcome: Outcome) -> list[PointOutcome]:
        return [point for point in self.points if point.outcome == outcome]

    @property
    def failed(self) -> list[PointOutcome]:
        return self.of("failed")

    @property
    def survived(self) -> list[PointOutcome]:
        return self.of("survived")

    @property
    def undecided(self) -> list[PointOutcome]:
        return self.of("undecided")

    @property
    def not_reached(self) -> list[PointOutcome]:
        return self.of("not reached")

    @property
    def not_survived(self) -> list[PointOutcome]:
        """Every point that failed, was undecided or was never reached."""
        return [point for point in self.points if point.outcome != "survived"]

    def counts(self) -> dict[Outcome, int]:
        """How many points ended in each outcome, every outcome listed."""
        return {outcome: len(self.of(outcome)) for outcome in OUTCOMES}

    def summary(self) -> str:
        if self.mode == "parallel":
            runs = f"{self.count} member(s) per launch, each on a clone of the cache"
        elif self.mode == "sequential":
            runs = f"the fleet of {self.count} on one cache"
        else:
            runs = "the start-up in the test process"
        counts = ", ".join(
            f"{number} {outcome}" for outcome, number in self.counts().items() if number
        )
        unit = "run(s) of the start-up" if self.mode == "in-process" else "launch(es)"
        inferred = len(self.inferred)
        grouped = (
            f", {len(self.explored)} run and {inferred} {INFERRED} (prune=True)" if inferred else ""
        )
        startups = (
            f", {self.startups} start-up(s)"
            if self.mode != "in-process" and self.startups != self.launches
            else ""
        )
        return (
            f"explore {self.race} on {self.target}: {len(self.points)} of {self.found} access"
            f" points{grouped} ({counts or 'none'}); {self.mode}: {runs}; {self.launches} {unit}"
            f"{startups} in {self.seconds:.1f} s"
        )

    def __str__(self) -> str:
        return "\n".join([self.summary(), *(point.line() for point in self.points)])

    def assert_all_survived(self) -> None:
        """Every access point was raced and the start-up came through; the message lists
        every point that failed, was undecided or was never reached, each with its replay."""
        __tracebackhide__ = True
        bad = self.not_survived
        if not bad:
            return
        undecided = all(point.outcome == "undecided" for point in bad)
        header = (
            f"{UNDECIDED_MARK}the machine was too slow to decide whether the start-up survived at"
            if undecided
            else "the start-up did not survive the race at"
        )
        lines = [f"{header} {len(bad)} of {len(self.points)} access points", self.summary()]
        for point in bad:
            lines.append(point.line())
            if point.covered_by is not None:
                lines.append(f"       {INFERRED}, as #{point.covered_by}: {point.covered}")
            if point.outcome == "not reached":
                lines.append(f"       {NOT_REACHED}")
            lines.append(f"       replay: {point.replay}")
        raise AssertionError("\n".join(lines))


def outcome_of(opened: bool, failed: bool, undecided: bool = False) -> Outcome:
    """A point's outcome, by one rule for both ways to explore: *not reached* unless its window
    opened (whatever became of the run: the race never happened), else *failed* (or
    *undecided*, where the machine was too slow to tell), else *survived*. A window that opened
    and met nothing the race changes (``PointOutcome.hit`` false: the process had read it
    before, or reads it where the child runtime cannot see) still counts: a run that failed
    with it open failed there, and one that came through survived the race at that moment."""
    if not opened:
        return "not reached"
    if not failed:
        return "survived"
    return "undecided" if undecided else "failed"


def wanted_points(
    points: Sequence[int] | None, settings: ExploreSettings, where: str
) -> list[int] | None:
    """The points asked for (``--startup-guard-explore-point`` first), or None for all."""
    if settings.only_point is not None:
        return [settings.only_point]
    if points is None:
        return None
    if isinstance(points, (str, bytes)) or not isinstance(points, Sequence):
        raise InvalidArgumentError(
            f"invalid points={points!r} for {where}: expected a list of access point numbers"
            " (1 is the first access) or None for every point"
        )
    for position, number in enumerate(points):
        whole_number(f"points[{position}]", number, where, minimum=1, meaning="an access point")
    return sorted(set(points))


def checked_points(wanted: list[int] | None, found: int) -> list[int]:
    """The points to explore: those asked for, which must exist, or every one of ``found``."""
    if wanted is None:
        return list(range(1, found + 1))
    missing = [number for number in wanted if number > found]
    if missing:
        raise StartupGuardError(
            f"access point {missing[0]} does not exist in this start-up (any more): its busiest"
            f" process made {found} access(es) of the repo, points 1 to {found};"
            " explore without points= to see them all"
        )
    return wanted


# The fixtures a test explores through: hub_race.explore() and server_fleet.explore() (and a
# startup_races(explore=...) case, which launches through server_fleet).
EXPLORING_FIXTURES = ("hub_race", "server_fleet")


def may_explore(marker_kwargs: Mapping[str, object] | None, fixtures: Collection[str]) -> bool:
    """Whether a test may explore access points, from what collection knows of it: its
    ``startup_races`` marker's arguments (None: it has none) and the fixtures it uses.

    Generous on purpose: a test that explores through a helper of its own must never be
    refused its replay, so any test with ``server_fleet``, or with ``hub_race`` outside a
    ``startup_races`` case (which asks for it through ``startup_case``), counts."""
    if marker_kwargs is not None and marker_kwargs.get("explore") not in (None, False):
        return True
    if "server_fleet" in fixtures:
        return True
    return marker_kwargs is None and "hub_race" in fixtures


def unexplored_point_message(source: str, point: str, tests: int) -> str:
    """Why ``--startup-guard-explore-point`` (given in ``source``: the flag, the variable or
    the ini key) is refused in a run where no test explores."""
    name, _, place = source.partition(" in ")
    given = f"{name}={point}" + (f" (in {place})" if place else "")
    option = "--startup-guard-explore-point"
    return (
        f"{given} replays one access point of an exploration, but none of the"
        f" {tests} collected test(s) explores: none has startup_races(..., explore=True) or uses"
        f" {' or '.join(EXPLORING_FIXTURES)}. Run it with the test it was printed for (its"
        f" replay command), or leave {option} out" + ("" if name == option else f" ({name})")
    )


__all__ = [
    "EXPLORING_FIXTURES",
    "FLEET_MODES",
    "INFERRED",
    "NOT_REACHED",
    "OUTCOMES",
    "AccessPoint",
    "Exploration",
    "ExploreSettings",
    "Mode",
    "Outcome",
    "PointOutcome",
    "checked_points",
    "covered_outcome",
    "may_explore",
    "outcome_of",
    "unexplored_point_message",
    "wanted_points",
]
