"""An ``explore=True`` case's hold on the test's launches.

An applied ``startup_races(..., explore=True)`` case does not arm its race: it takes the test's
``server_fleet.launch`` (``ServerFleet.route_launches``), explores every access point of that
start-up through ``ServerFleet.explore_launch``, and keeps what it found for ``check``.
"""

from __future__ import annotations

from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.fleet.explore.request import ExploreRequest
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.server_fleet import ExploredLaunch, ServerFleet
from pytest_startup_guard.fleet.spec import LaunchSpec


class CaseExploration:
    """An applied ``explore=True`` case's hold on the test's launches (``ServerFleet``'s
    ``route_launches``): the first explores every access point, and what it found is kept."""

    def __init__(self, fleets: ServerFleet, request: ExploreRequest) -> None:
        self.fleets = fleets
        self.request = request
        self.found: ExploredLaunch | None = None

    def launch(self, spec: LaunchSpec) -> Fleet:
        __tracebackhide__ = True
        if self.found is not None:
            raise StartupGuardError(
                "an explore=True case explores at its first server_fleet.launch(); launch"
                " once, then startup_case.check(fleet)"
            )
        self.found = self.fleets.explore_launch(spec, self.request)
        return self.found.clean


__all__ = ["CaseExploration"]
