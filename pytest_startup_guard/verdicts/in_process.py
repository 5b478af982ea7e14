"""Verdicts for start-ups that run in the test process: a callable, not a fleet.

``assert_survives(startup, race)``: the call returns under the armed race(s), with a result
``expect`` accepts, and every race hit during it. ``assert_fails_closed(startup, within)``: the
call raises within the time allowed on a corrupt config (hanging is failing, returning hides it).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pytest_startup_guard.checks import function, pattern, seconds, shown
from pytest_startup_guard.errors import ArgumentTypeError
from pytest_startup_guard.races.armed import ArmedRace


def assert_survives(
    startup: Callable[[], object],
    race: ArmedRace | Sequence[ArmedRace] | None = None,
    *,
    expect: Callable[[object], object] | None = None,
) -> object:
    """``startup()`` must return (not raise) under the armed race(s), with a result ``expect``
    accepts, and the race(s) must have hit during the call. Returns the result."""
    __tracebackhide__ = True
    where = "assert_survives()"
    function("startup", startup, where, "a callable that runs the start-up, such as lambda: load()")
    races = _armed_races(race, where)
    if expect is not None:
        function("expect", expect, where, "a callable that accepts the start-up's result")
    before = [len(armed.hits) for armed in races]
    try:
        result = startup()
    except Exception as error:
        raise AssertionError(
            f"the start-up did not survive {_race_names(races)}: {type(error).__name__}: {error}"
        ) from error
    if expect is not None and not expect(result):
        raise AssertionError(
            f"the start-up survived {_race_names(races)} but returned {result!r}, which expect()"
            " rejects: it came up on the wrong config (a fallback?)"
        )
    for armed, count in zip(races, before, strict=True):
        if len(armed.hits) == count:
            raise AssertionError(
                f"{armed.describe()} never hit during the start-up: surviving it proves nothing"
            )
    return result


def assert_fails_closed(
    startup: Callable[[], object], within: float = 10.0, match: str | None = None
) -> BaseException:
    """``startup()`` must raise within ``within`` seconds (on a corrupt config), with ``match``
    found in the message. Returning hides the corruption; not raising in time is a hang."""
    __tracebackhide__ = True
    where = "assert_fails_closed()"
    function("startup", startup, where, "a callable that runs the start-up, such as lambda: load()")
    within = seconds("within", within, where, positive=True)
    if match is not None:
        pattern("match", match, where)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = startup()
        except BaseException as error:  # judged below, in the test's thread
            outcome["error"] = error

    started = time.monotonic()
    worker = threading.Thread(target=run, name="startup-guard-fails-closed", daemon=True)
    worker.start()
    worker.join(within)
    if worker.is_alive():
        raise AssertionError(
            f"the start-up hangs: it neither returned nor raised within {within:g} s on a corrupt"
            " config; hanging is failing (it keeps running in a daemon thread)"
        )
    if "error" not in outcome:
        raise AssertionError(
            f"the start-up returned {outcome.get('result')!r} on a corrupt config instead of"
            " raising: it hid the corruption"
        )
    error: BaseException = outcome["error"]
    if match is not None and not re.search(match, str(error)):
        raise AssertionError(
            f"the start-up failed closed after {time.monotonic() - started:.2f} s, but"
            f" {type(error).__name__}: {error} does not match {match!r}"
        )
    return error


def _armed_races(race: object, where: str) -> list[ArmedRace]:
    """``race=`` as a list: None, one armed race, or several (what ``hub_race.arm()`` returns;
    a race's name is not enough, for it says nothing of where it is armed)."""
    accepted = "what hub_race.arm() returned (an ArmedRace), a list of them, or None"
    if race is None:
        return []
    if isinstance(race, ArmedRace):
        return [race]
    if isinstance(race, (str, bytes)) or not isinstance(race, Iterable):
        raise ArgumentTypeError(f"invalid race={shown(race)} for {where}: expected {accepted}")
    races = list(race)
    for position, armed in enumerate(races):
        if not isinstance(armed, ArmedRace):
            raise ArgumentTypeError(
                f"invalid race[{position}]={shown(armed)} for {where}: expected {accepted}"
            )
    return races


def _race_names(races: list[ArmedRace]) -> str:
    return ", ".join(armed.describe() for armed in races) or "the race"
