"""``ServerFleet``, the ``server_fleet`` fixture: launch fleets, and explore their start-up.

``FleetLauncher`` (``fleet.py``) launches and stops fleets; this adds ``explore`` (every access
point of a start-up raced, ``explore.py``) and the launch of an applied
``startup_races(..., explore=True)`` case, which explores instead of launching once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_startup_guard.cache.hubcache import CachedRepo, FakeHubCache
from pytest_startup_guard.fleet import ready as ready_module
from pytest_startup_guard.fleet.exploration import ExploreRequest, FleetExploration
from pytest_startup_guard.fleet.explore import Explorer, explore_case
from pytest_startup_guard.fleet.fleet import Fleet, FleetLauncher
from pytest_startup_guard.fleet.port_faults import PortFault
from pytest_startup_guard.races.base import Race
from pytest_startup_guard.races.hubrace import HubRace


class ServerFleet(FleetLauncher):
    """The ``server_fleet`` fixture: ``launch`` fleets, ``explore`` their start-up; every
    process stops at teardown."""

    def __init__(
        self,
        *args: Any,
        hub_race: HubRace | None = None,
        replay: Callable[[int], str] | None = None,
        explore_point: int | None = None,
        explore_request: Callable[[], ExploreRequest | None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.hub_race = hub_race  # arms each explored point
        self.replay = replay  # the replay command of one access point
        self.explore_point = explore_point  # --startup-guard-explore-point: explore only this
        self.explore_request = explore_request  # an applied explore=True case of the test
        self.explorations: list[FleetExploration] = []

    def launch(
        self,
        argv: Sequence[str],
        *,
        count: int = 1,
        ready: ready_module.Probe,
        env: Mapping[str, str] | None = None,
        cache: FakeHubCache | None = None,
        timeout: float | None = None,
        cwd: str | os.PathLike[str] | None = None,
        ports: Sequence[int] | None = None,
        faults: Sequence[PortFault] | PortFault | None = None,
    ) -> Fleet:
        """Start ``count`` processes of ``argv`` at once; return when each is ready, has
        exited, or has passed the readiness time-out. Ready ones run until ``stop``/teardown.

        ``faults``: port faults (``port_taken``, ``same_port``); one that no member met raises
        ``AssertionError`` here, unless it was made with ``allow_miss=True``.

        In an applied ``startup_races(..., explore=True)`` case this explores every access
        point instead (``explore``) and returns the fleet of the launch that ran clean (in
        parallel mode its member 0; the others raced the first points), stopped; the case's
        ``check`` judges the exploration."""
        __tracebackhide__ = True
        request = self.explore_request() if self.explore_request is not None else None
        if request is not None:
            return explore_case(
                self._explorer(argv, count, ready, env, timeout, cwd), request, self.explorations
            )
        return super().launch(
            argv,
            count=count,
            ready=ready,
            env=env,
            cache=cache,
            timeout=timeout,
            cwd=cwd,
            ports=ports,
            faults=faults,
        )

    def explore(
        self,
        argv: Sequence[str],
        race: str | Race,
        repo: CachedRepo,
        filename: str,
        *,
        count: int = 1,
        ready: ready_module.Probe,
        points: Sequence[int] | None = None,
        mode: str = "parallel",
        hold: float = 0.5,
        revision: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> FleetExploration:
        """Race ``filename`` of ``repo`` at every access point of the fleet's start-up, one point
        per run, and return how each run fared (``.assert_all_survived()``).

        An access point is a process's nth access of the repo (``on_access(nth=n)``): the points
        are those of the busiest process of a clean start-up. ``mode="parallel"`` gives every
        member a private clone of the cache and a point of its own, so a launch of ``count``
        members explores ``count`` points at once (the first launch's member 0 runs clean and
        finds the points); ``mode="sequential"`` launches the whole fleet on the one cache once
        clean and then once per point, for members that must share it. ``points=[...]`` (or
        ``--startup-guard-explore-point=N``) explores only those."""
        __tracebackhide__ = True
        exploration = self._explorer(argv, count, ready, env, timeout, cwd).run(
            race, repo, filename, points=points, mode=mode, hold=hold, revision=revision
        )
        self.explorations.append(exploration)
        return exploration

    def _explorer(
        self,
        argv: Sequence[str],
        count: int,
        ready: ready_module.Probe,
        env: Mapping[str, str] | None,
        timeout: float | None,
        cwd: str | os.PathLike[str] | None,
    ) -> Explorer:
        if self.hub_race is None:
            from pytest_startup_guard.errors import StartupGuardError

            raise StartupGuardError("server_fleet.explore() needs the test's hub_race")
        return Explorer(
            self,
            self.hub_race,
            self.folder / f"explore-{len(self.explorations)}",
            argv,
            count,
            ready,
            env,
            timeout,
            cwd,
            replay=self.replay,
            only_point=self.explore_point,
        )


__all__ = ["ServerFleet"]
