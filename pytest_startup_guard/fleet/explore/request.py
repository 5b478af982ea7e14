"""What the fleet side of exploring adds to the one exploration model (``races/exploration.py``).

``ExploreRequest``: what an applied ``startup_races(..., explore=True)`` case explores at the
test's launch (``ServerFleet.explore_launch``); and the words for a fleet member's failure at a
point. The engine that runs the launches is ``explorer.py``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_startup_guard.cache.hubcache import CachedRepo
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.races.base import Race
from pytest_startup_guard.races.exploration import FLEET_MODES, Mode

_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failure)\b")


@dataclass(frozen=True)
class ExploreRequest:
    """What one exploration races, and how (``server_fleet.explore``'s own arguments, or an
    applied ``startup_races(..., explore=True)`` case's), as given: ``Explorer.run`` checks it."""

    race: str | Race
    repo: CachedRepo
    filename: str
    mode: str = "parallel"
    points: Sequence[int] | None = None
    hold: float = 0.5
    revision: str | None = None
    prune: bool = False  # opt-in: infer the inert points instead of running them


def check_mode(mode: object, where: str) -> Mode:
    for known in FLEET_MODES:
        if mode == known:
            return known
    raise StartupGuardError(
        f"invalid mode={mode!r} for {where}: expected 'parallel' (a clone of the cache and a"
        " point per member) or 'sequential' (the whole fleet on one cache, a point per launch)"
    )


def failure_line(server: Server) -> str:
    """``server 2: EXITED with code 1 after 0.31 s, before it was ready: OSError: ...``."""
    status = server.status()
    # The end of its output only, printable: a member may print hundreds of megabytes.
    lines = [line.strip() for line in server.tail(50).splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.match(line)]
    error = errors[-1] if errors else (lines[-1] if lines else None)  # else its last words
    return f"server {server.index}: {status}" + (f": {error[:200]}" if error else "")


__all__ = ["ExploreRequest", "check_mode", "failure_line"]
