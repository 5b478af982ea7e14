"""A hold that the wall-time cap ends before the process had it in its own time is cut short.

On a machine so busy that a process waits for a CPU for longer than ``HOLD_MAX_STRETCH`` x its hold,
the window closes by the cap: the access it was let go at may run after the window closed, so
its hit is not proof that it met the change (``ArmedRace.cut_short``; a case says undecided).
"""

from __future__ import annotations

from pytest_startup_guard.races.armed import _Holder
from pytest_startup_guard.runtime.own_time import HOLD_MAX_STRETCH, OwnClock


class StarvedClock(OwnClock):
    """A process that waited for a CPU all the time since the hold began."""

    def waited(self) -> float:
        return 1e9


class RunningClock(OwnClock):
    """A process that never waited for a CPU."""

    def waited(self) -> float:
        return 0.0


def test_a_hold_the_cap_ends_is_cut_and_one_had_in_own_time_is_not() -> None:
    hold = 0.02
    starved = _Holder(until=100.0 + hold, hold=hold, clock=StarvedClock(0, 100.0))
    assert not starved.over(100.0 + hold)  # its own time has not passed: held on
    assert starved.over(100.0 + hold * HOLD_MAX_STRETCH + 0.001) and starved.cut
    running = _Holder(until=100.0 + hold, hold=hold, clock=RunningClock(0, 100.0))
    assert running.over(100.0 + hold + 0.001) and not running.cut
