"""Misuse by class, not by instance (issue 42): Hypothesis strategies of what is wrong for each
kind of argument, and the one way a generated misuse is judged.

``tests/test_misuse_properties.py`` draws from these strategies for every launch keyword, the
faults' and probes' constructors, the numeric keywords and the numeric options, ini keys and
environment variables; each drawn value must be refused by the plugin's own error at the call,
naming the argument. A property never stops at its first failure: ``explore`` runs all its
examples and returns every problem, so that a run counts how many generated misuses fail.
Deterministic (``derandomize=True``, no example database): the same examples in every run, so
CI cannot flake on a new draw. The inner pytest of the launch properties imports this module
too (the test copies it beside its test file).
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pytest_startup_guard.errors import StartupGuardError

# The limits the plugin promises (docs/options.md, docs/fleet.md): a day of seconds, 256 members.
MAX_SECONDS = 86400.0
MAX_MEMBERS = 256
EXAMPLES = 30  # per property: enough to reach every branch of a strategy, fast in-process

# -- what is wrong ---------------------------------------------------------------------------

NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
PAST_A_DAY = st.one_of(
    st.floats(min_value=MAX_SECONDS * 1.0001, max_value=1e308),
    st.integers(min_value=int(MAX_SECONDS) + 1, max_value=10**30),
    st.just(1e300),
)
NEGATIVE = st.one_of(
    st.floats(max_value=-1e-9, min_value=-1e308), st.integers(min_value=-(10**30), max_value=-1)
)
# Not a number at all: text, bytes, containers, an object; bool is an int Python-wise, and wrong.
NOT_A_NUMBER = st.one_of(
    st.text(max_size=4),
    st.binary(max_size=3),
    st.lists(st.integers(0, 3), max_size=2),
    st.builds(object),
    st.none(),
)


def bad_seconds(*, positive: bool, none_ok: bool = True) -> st.SearchStrategy[object]:
    """Never a number of seconds the plugin may take: not finite, past a day, negative, a bool,
    not a number (None too unless ``none_ok``: None then means "no limit"), 0 if ``positive``."""
    wrong = NOT_A_NUMBER.filter(lambda value: value is not None) if none_ok else NOT_A_NUMBER
    options = [NOT_FINITE, PAST_A_DAY, NEGATIVE, st.booleans(), wrong]
    if positive:
        options.append(st.sampled_from([0, 0.0, -0.0]))
    return st.one_of(*options)


def bad_whole(
    minimum: int, maximum: int | None = None, *, none_ok: bool = False
) -> st.SearchStrategy[object]:
    """Never a whole number from ``minimum`` to ``maximum``: below, above, a float, a bool,
    something else (None too unless ``none_ok``)."""
    wrong = NOT_A_NUMBER.filter(lambda value: value is not None) if none_ok else NOT_A_NUMBER
    options = [
        st.integers(max_value=minimum - 1, min_value=minimum - 10**20),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        wrong,
    ]
    if maximum is not None:
        options.append(st.integers(min_value=maximum + 1, max_value=maximum + 10**30))
    return st.one_of(*options)


def beyond(count: int) -> st.SearchStrategy[int]:
    """A member index a launch of ``count`` members does not have."""
    return st.integers(min_value=count, max_value=10**6)


# A number as text a setting cannot be: text drawn from these letters, filtered per setting.
SETTING_TEXT = st.one_of(
    st.text(alphabet=string.ascii_letters + string.digits + ".-+_x", min_size=1, max_size=12),
    st.sampled_from(["1e300", "inf", "-inf", "nan", "1e9", "0", "-1", "0.0", "1e-400"]),
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
).filter(lambda text: text.strip() != "")  # empty text is "not set", not a mistake


def valid_seconds(text: str) -> bool:
    """What docs/options.md says a time-out may be: a positive number of seconds up to a day."""
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and 0 < value <= MAX_SECONDS


def valid_whole(minimum: int, maximum: int, *, base: int = 10) -> Callable[[str], bool]:
    def valid(text: str) -> bool:
        try:
            value = int(text.strip(), base)
        except ValueError:
            return False
        return minimum <= value <= maximum

    return valid


# -- how a misuse is judged -------------------------------------------------------------------


def refusal_problem(call: Callable[[], object], *words: str) -> str | None:
    """None if ``call()`` raises the plugin's own error saying every one of ``words``; else what
    went wrong: accepted, an internal exception, or a message that does not name the argument."""
    try:
        call()
    except StartupGuardError as error:
        missing = [word for word in words if word not in str(error)]
        return f"the message does not say {missing}: {error}" if missing else None
    except Exception as error:  # the very thing a property looks for
        return f"an internal {type(error).__name__}: {error}"
    return "accepted silently"


def explore(
    strategy: st.SearchStrategy[Any],
    attempt: Callable[[Any], str | None],
    *,
    examples: int = EXAMPLES,
) -> tuple[int, list[str]]:
    """``attempt(example)`` on each example drawn from ``strategy`` (the same ones every run):
    how many ran, and ``repr(example): problem`` for each that was not refused."""
    ran: list[object] = []
    problems: list[str] = []

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),  # no shrinking: every problem is kept as drawn
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(example: Any) -> None:
        ran.append(example)
        problem = attempt(example)
        if problem is not None:
            problems.append(f"{example!r}: {problem}")

    run()
    return len(ran), problems


__all__ = [
    "EXAMPLES",
    "MAX_MEMBERS",
    "MAX_SECONDS",
    "SETTING_TEXT",
    "bad_seconds",
    "bad_whole",
    "beyond",
    "explore",
    "refusal_problem",
    "valid_seconds",
    "valid_whole",
]
