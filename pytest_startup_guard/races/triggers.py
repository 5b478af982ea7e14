"""When a race window opens and closes.

- ``on_access(nth=1, hold=0.5, accesses=None)`` (the default): right before a process's
  ``nth`` access under the race's folders; deterministic.
- ``after(seconds, hold=0.5)``: a fixed time after the fleet is released, for processes the
  child runtime cannot see (non-Python servers, reads inside Rust extensions).
- ``chaos(gap=0.001, hold=0.0, seed=None)``: a refresher process runs the race in a loop, as a
  real refresher would, with seeded jitter, for the whole test.
- ``placed()``: the fault is in place from arming until teardown, as a persistent one is in
  production (the default of stale locks: nobody ever removes them).
"""

from __future__ import annotations

from dataclasses import dataclass

# ``after(seconds, ...)`` has a parameter of that name: the check is ``_seconds`` here.
from pytest_startup_guard.checks import seconds as _seconds
from pytest_startup_guard.checks import whole_number


@dataclass(frozen=True)
class OnAccess:
    nth: int = 1
    hold: float = 0.5
    accesses: int | None = None
    max_hold: float = 30.0  # with ``accesses``: the window closes by then whatever happens

    def describe(self) -> str:
        closing = (
            f"accesses={self.accesses}" if self.accesses is not None else f"hold={self.hold:g}"
        )
        return f"on_access(nth={self.nth}, {closing})"


@dataclass(frozen=True)
class After:
    seconds: float
    hold: float = 0.5

    def describe(self) -> str:
        return f"after({self.seconds:g}, hold={self.hold:g})"


@dataclass(frozen=True)
class Chaos:
    gap: float = 0.001
    hold: float = 0.0
    seed: int | None = None

    def describe(self) -> str:
        seed = "" if self.seed is None else f", seed={self.seed}"
        return f"chaos(gap={self.gap:g}, hold={self.hold:g}{seed})"


@dataclass(frozen=True)
class Placed:
    def describe(self) -> str:
        return "placed()"


Trigger = OnAccess | After | Chaos | Placed


def on_access(nth: int = 1, hold: float = 0.5, accesses: int | None = None) -> OnAccess:
    """Open right before each process's ``nth`` access under the race's folders (the repo's
    folder: every process meets the fault at its own ``nth`` access at the latest); close
    ``hold`` seconds after the last process that triggered it or, with ``accesses=N``, once each
    triggering process has made N accesses of the cache inside the window, the triggering one
    included (any file under the cache root counts, ``HF_HOME/token`` too)."""
    where = "on_access()"
    return OnAccess(
        nth=whole_number("nth", nth, where, minimum=1),
        hold=_seconds("hold", hold, where),
        accesses=None if accesses is None else whole_number("accesses", accesses, where, minimum=1),
    )


def after(seconds: float, hold: float = 0.5) -> After:
    """Open ``seconds`` after the fleet is released (or after arming, if no fleet is launched
    first); close ``hold`` seconds later."""
    where = "after()"
    return After(_seconds("seconds", seconds, where), _seconds("hold", hold, where, positive=True))


def chaos(gap: float = 0.001, hold: float = 0.0, seed: int | None = None) -> Chaos:
    """A refresher process that opens and closes the window in a loop for the whole test:
    windows of ``hold`` and gaps of ``gap`` seconds, each jittered by a seeded factor 0.5-1.5
    (``seed`` defaults to the test's seed, so a run seed replays the same refresher)."""
    where = "chaos()"
    checked_seed = None if seed is None else whole_number("seed", seed, where)
    return Chaos(
        _seconds("gap", gap, where, positive=True), _seconds("hold", hold, where), checked_seed
    )


def placed() -> Placed:
    """Put the fault in place now and leave it until teardown: one window for the whole test
    (every access of the target hits it)."""
    return Placed()
