"""What an exploration found: the access points of a start-up and how each raced run fared.

``AccessPoint`` (a process's nth access of the repo), ``PointOutcome`` (one point's run),
``FleetExploration`` (all of them, with ``assert_all_survived``) and ``ExploreRequest`` (an
applied ``startup_races(..., explore=True)`` case). The engine that runs the launches is
``explore.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_startup_guard.cache.hubcache import CachedRepo
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.fleet.fleet import Fleet, Server
from pytest_startup_guard.races.armed import Hit

MODES = ("parallel", "sequential")
OUTCOMES = ("survived", "failed", "undecided", "not reached")
NOT_REACHED = "its run never made this access, so the point proves nothing"
_COMMIT = re.compile(r"\b[0-9a-f]{40}\b")
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failure)\b")


@dataclass(frozen=True)
class AccessPoint:
    """The nth access of a process of the clean start-up: what it did, and to which file."""

    number: int
    op: str  # open, os.listdir, os.scandir
    path: str  # relative to the repo's folder
    process: str  # who made it in the clean start-up: "server 0" or "server 0, child pid 123"

    @property
    def short_path(self) -> str:
        """``path`` with a commit shortened: ``snapshots/5f6c588/config.json``."""
        return _COMMIT.sub(lambda match: match.group(0)[:7], self.path)


@dataclass
class PointOutcome:
    """How the start-up fared with the window opening right before one access point."""

    point: AccessPoint
    outcome: str  # one of OUTCOMES
    hit: bool  # the window opened, and the access met it
    launch: int  # which launch of the exploration raced it (1-based)
    members: tuple[int, ...]  # the members that carried it (all of them, sequentially)
    failure: str | None  # the first failing member's status and the first line of its error
    replay: str
    hits: list[Hit] = field(default_factory=list)  # the accesses that met its window

    def problem(self) -> str:
        """One line for a point that was not survived: the access, what became of it, why,
        and the command that replays it (a ``startup_case`` check lists these)."""
        point = self.point
        what = f"access point #{point.number} ({point.op} {point.short_path}): {self.outcome}"
        if self.failure:
            what += f": {self.failure}"
        if self.outcome == "not reached":
            what += f": {NOT_REACHED}"
        prefix = "UNDECIDED: " if self.outcome == "undecided" else ""
        return f"{prefix}{what}; replay: {self.replay}"

    def line(self) -> str:
        point = self.point
        head = f"  #{point.number:<3} {point.op:<11} {point.short_path:<40} {self.outcome}"
        return head + (f"  {self.failure}" if self.failure else "")


@dataclass
class FleetExploration:
    """Every access point of a fleet's start-up, raced one at a time: ``points``, ``mode``."""

    race: str
    target: str
    mode: str
    count: int  # members per launch
    points: list[PointOutcome] = field(default_factory=list)
    launches: int = 0
    seconds: float = 0.0
    found: int = 0  # access points of the clean start-up's busiest process
    clean: Fleet | None = None  # the launch that ran clean (parallel: its member 0)

    def of(self, outcome: str) -> list[PointOutcome]:
        return [point for point in self.points if point.outcome == outcome]

    @property
    def failed(self) -> list[PointOutcome]:
        return self.of("failed")

    @property
    def survived(self) -> list[PointOutcome]:
        return self.of("survived")

    @property
    def not_reached(self) -> list[PointOutcome]:
        return self.of("not reached")

    @property
    def not_survived(self) -> list[PointOutcome]:
        """Every point that failed, was undecided or was never reached."""
        return [point for point in self.points if point.outcome != "survived"]

    def summary(self) -> str:
        per_launch = (
            f"{self.count} member(s) per launch, each on a clone of the cache"
            if self.mode == "parallel"
            else f"the fleet of {self.count} on one cache"
        )
        counts = ", ".join(
            f"{len(self.of(outcome))} {outcome}" for outcome in OUTCOMES if self.of(outcome)
        )
        return (
            f"explore {self.race} on {self.target}: {len(self.points)} of {self.found} access"
            f" points ({counts or 'none'}); {self.mode}: {per_launch}; {self.launches} launch(es)"
            f" in {self.seconds:.1f} s"
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
            "UNDECIDED: the machine was too slow to decide whether the start-up survived at"
            if undecided
            else "the start-up did not survive the race at"
        )
        lines = [f"{header} {len(bad)} of {len(self.points)} access points", self.summary()]
        for point in bad:
            lines.append(point.line())
            if point.outcome == "not reached":
                lines.append(f"       {NOT_REACHED}")
            lines.append(f"       replay: {point.replay}")
        raise AssertionError("\n".join(lines))


@dataclass(frozen=True)
class ExploreRequest:
    """An applied ``startup_races(..., explore=True)`` case: what its launch explores."""

    race: str
    repo: CachedRepo
    filename: str
    mode: str
    done: list[FleetExploration] = field(default_factory=list)  # what it explored, once


def check_mode(mode: object, where: str) -> str:
    if mode not in MODES:
        raise StartupGuardError(
            f"invalid mode={mode!r} for {where}: expected 'parallel' (a clone of the cache and a"
            " point per member) or 'sequential' (the whole fleet on one cache, a point per launch)"
        )
    assert isinstance(mode, str)
    return mode


def failure_line(server: Server) -> str:
    """``server 2: EXITED with code 1 after 0.31 s, before it was ready: OSError: ...``."""
    status = server.status()
    lines = [line.strip() for line in server.output.splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.match(line)]
    error = errors[-1] if errors else (lines[-1] if lines else None)  # else its last words
    return f"server {server.index}: {status}" + (f": {error[:200]}" if error else "")


__all__ = [
    "MODES",
    "OUTCOMES",
    "AccessPoint",
    "ExploreRequest",
    "FleetExploration",
    "PointOutcome",
    "check_mode",
    "failure_line",
]
