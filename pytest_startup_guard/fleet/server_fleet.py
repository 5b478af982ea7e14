"""``ServerFleet``, the ``server_fleet`` fixture: launch fleets, and explore their start-up.

Each entry point checks its arguments into one ``LaunchSpec`` (``spec.py``) and passes it whole:
``launch`` to the ``FleetLauncher`` (``launcher.py``), ``explore`` and ``explore_writer`` to
their engines (``explore/``). A ``startup_races(..., explore=True)`` case, once applied, takes
the test's launches (``route_launches``): it explores each through ``explore_launch``, a call of
its own, and keeps what it found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_startup_guard.cache.hubcache import CachedRepo, FakeHubCache
from pytest_startup_guard.checks import instance
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.fleet.explore.explorer import Explorer
from pytest_startup_guard.fleet.explore.request import ExploreRequest
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.launcher import FleetLauncher
from pytest_startup_guard.fleet.spec import ExploreOptions, FleetOptions, LaunchOptions, LaunchSpec
from pytest_startup_guard.lifetimes import lives_for_its_test
from pytest_startup_guard.races.base import Race
from pytest_startup_guard.races.exploration import Exploration, ExploreSettings
from pytest_startup_guard.runtime.controller import RuntimeController

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing has it from Python 3.11

    from pytest_startup_guard.fleet.explore.writer import WriterExploration, WriterSettings


class LaunchRoute(Protocol):
    """What takes a test's launches instead of the launcher: an applied ``explore=True`` case."""

    def launch(self, spec: LaunchSpec) -> Fleet: ...


@dataclass(frozen=True)
class ExploredLaunch:
    """What ``explore_launch`` found, and the launch that ran clean (the fleet ``launch``
    returns in an ``explore=True`` case)."""

    exploration: Exploration
    clean: Fleet


@lives_for_its_test
class ServerFleet:
    """The ``server_fleet`` fixture: ``launch`` fleets, ``explore`` their start-up; every
    process stops at teardown."""

    def __init__(
        self,
        launcher: FleetLauncher,
        *,
        explore_settings: ExploreSettings | None = None,
        writer_settings: WriterSettings | None = None,
    ) -> None:
        self.launcher = launcher
        self.hub_race = launcher.races  # arms each explored point
        self.explore_settings = (
            explore_settings if explore_settings is not None else ExploreSettings()
        )
        self.explorations: list[Exploration] = []
        # explore_writer: what it found, and the run's pair to replay (None: read from the
        # environment, ``explore.writer.writer_settings_of``)
        self.writer_explorations: list[WriterExploration] = []
        self.writer_settings = writer_settings
        self._route: LaunchRoute | None = None

    @property
    def folder(self) -> Path:
        return self.launcher.folder

    @property
    def controller(self) -> RuntimeController:
        """The test's child runtime: what every member reported (``accesses``, ``binds``)."""
        return self.launcher.controller

    @property
    def default_cache(self) -> FakeHubCache | None:
        """The cache members get unless a launch names one (the test's ``hub_cache``)."""
        return self.launcher.default_cache

    @property
    def fleets(self) -> list[Fleet]:
        """Every fleet launched so far, in order (an exploration's launches included)."""
        return self.launcher.fleets

    def route_launches(self, route: LaunchRoute) -> None:
        """Send every later ``launch`` to ``route`` (an applied ``explore=True`` case explores
        it), once per test."""
        if self._route is not None:
            raise StartupGuardError("an explore=True case was already applied to this fleet")
        self._route = route

    def launch(self, argv: Sequence[str], **options: Unpack[LaunchOptions]) -> Fleet:
        """Start ``count`` processes of ``argv`` at once; return when each is ready, has
        exited, or has passed the readiness time-out. Ready ones run until ``stop``/teardown.

        ``faults=[...]``: what the launch puts in the members' way (``faults/``); one that no
        member met raises ``AssertionError`` here, unless made with ``allow_miss=True``.
        ``workers=N``: a member is ready once N of its worker processes are up.
        ``native_accesses=True``: file calls made in native code are accesses too (an
        ``LD_PRELOAD`` interposer). ``preload=[...]`` / ``warm=True``: fork the members from a
        warm template (``warm="or_cold"``: or start cold where forking is unsafe; ``None``:
        the run's ``--startup-guard-warm``). docs/fleet.md and docs/warm.md say the rest.

        In an applied ``startup_races(..., explore=True)`` case the case takes the launch: it
        explores every access point and returns the fleet of the launch that ran clean."""
        __tracebackhide__ = True
        spec = LaunchSpec.checked(
            "server_fleet.launch()",
            argv,
            options,
            LaunchOptions,
            default_timeout=self.launcher.default_timeout,
        )
        if self._route is not None:
            return self._route.launch(spec)
        return self.launcher.launch(spec)

    def explore_launch(self, spec: LaunchSpec, request: ExploreRequest) -> ExploredLaunch:
        """Explore every access point of ``spec``'s start-up as an ``explore=True`` case asks
        (``request``): what the exploration found, and the launch that ran clean."""
        __tracebackhide__ = True
        explorer = self._explorer(spec)
        exploration = explorer.run(request)
        assert explorer.clean is not None
        self.explorations.append(exploration)
        return ExploredLaunch(exploration, explorer.clean)

    def explore(
        self,
        argv: Sequence[str],
        race: str | Race,
        repo: CachedRepo,
        filename: str,
        *,
        points: Sequence[int] | None = None,
        mode: str = "parallel",
        hold: float = 0.5,
        revision: str | None = None,
        prune: bool = False,
        **options: Unpack[ExploreOptions],
    ) -> Exploration:
        """Race ``filename`` of ``repo`` at every access point of the fleet's start-up, one point
        per run, and return how each run fared (``.assert_all_survived()``).

        An access point is a process's nth access of the repo (``on_access(nth=n)``), those of
        the busiest process of a clean start-up. ``mode="parallel"`` gives every member a
        private clone of the cache and a point of its own; ``mode="sequential"`` launches the
        whole fleet on the one cache once per point. ``points=[...]`` (or
        ``--startup-guard-explore-point=N``) explores only those. Every point is run;
        ``prune=True`` (opt-in) runs one of the points after which no process touches what the
        race changes and reports the others as "inferred, not run" (``races/point_groups.py``
        says what it assumes). ``warm=``,
        ``preload=`` and ``native_accesses=`` (file calls of native code are access points
        too): as ``launch`` takes them. docs/fleet.md says the rest."""
        __tracebackhide__ = True
        spec = LaunchSpec.checked(
            "server_fleet.explore()",
            argv,
            options,
            ExploreOptions,
            default_timeout=self.launcher.default_timeout,
        )
        request = ExploreRequest(race, repo, filename, mode, points, hold, revision, prune)
        exploration = self._explorer(spec).run(request)
        self.explorations.append(exploration)
        return exploration

    def explore_writer(
        self,
        writer: object,
        argv: Sequence[str],
        *,
        points: Sequence[int] | None = None,
        pairs: Sequence[tuple[int, int]] | None = None,
        cache: FakeHubCache | None = None,
        **options: Unpack[FleetOptions],
    ) -> WriterExploration:
        """Pause the real ``writer`` (``hub_remote.writer(...)``, or a plain argv writing
        ``cache``, by default the test's ``hub_cache``) after each of its steps, with the
        readers (a fleet of ``argv``, as ``launch`` takes it) held at each of their access
        points until then, and return how every (step, point) pair fared
        (``.assert_no_failures()``). ``points=[j, ...]`` holds the readers at those points only;
        ``pairs=[(step, point)]`` (or ``--startup-guard-writer-pair=STEP:POINT``) runs only
        those pairs."""
        __tracebackhide__ = True
        from pytest_startup_guard.fleet.explore.writer import (
            WriterExplorer,
            writer_settings_of,
        )
        from pytest_startup_guard.fleet.explore.writer_steps import (
            checked_pairs,
            checked_points,
            checked_writer,
        )

        where = "server_fleet.explore_writer()"
        readers = LaunchSpec.checked(
            where, argv, options, FleetOptions, default_timeout=self.launcher.default_timeout
        )
        if cache is not None:
            instance(
                "cache",
                cache,
                FakeHubCache,
                where,
                "a FakeHubCache (the hub_cache fixture, or FakeHubCache(tmp_path / 'cache'))",
            )
        command = checked_writer(writer, cache or self.default_cache, where)
        wanted = checked_pairs(pairs, where)
        wanted_points = checked_points(points, where)
        settings = self.writer_settings or writer_settings_of(self.explore_settings)
        explorer = WriterExplorer(
            self.launcher,
            settings,
            self.folder / f"explore-writer-{len(self.writer_explorations)}",
            readers,
        )
        exploration = explorer.run(command, wanted, wanted_points)
        self.writer_explorations.append(exploration)
        return exploration

    def unreported_problems(self) -> list[str]:
        """What failed in a ready member after readiness that no check reported (teardown
        asks before it stops the fleets)."""
        return [problem for fleet in self.fleets for problem in fleet.unreported_problems()]

    def stop_all(self) -> None:
        """Stop every fleet launched (teardown does)."""
        self.launcher.stop_all()

    def _explorer(self, spec: LaunchSpec) -> Explorer:
        if self.hub_race is None:
            raise StartupGuardError("server_fleet.explore() needs the test's hub_race")
        return Explorer(
            self.launcher,
            self.hub_race,
            self.explore_settings,
            self.folder / f"explore-{len(self.explorations)}",
            spec,
        )


__all__ = ["ExploredLaunch", "LaunchRoute", "ServerFleet"]
