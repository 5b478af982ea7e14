"""Checks of a user's argument, shared by every part: one wording for one kind of mistake.

Each raises ``InvalidArgumentError`` (a ``StartupGuardError`` and a ``ValueError``), or the
subclass of it a part names with ``error=``, whose message names the argument, the value, where
it was given and what is accepted:
``invalid count=0 for server_fleet.launch(): expected a whole number >= 1``.
``parse_whole_number`` reads such a number from text (a command line, an ini file, the
environment), where the caller names the setting and where it came from.
"""

from __future__ import annotations

import math

from pytest_startup_guard.errors import InvalidArgumentError


def whole_number(
    name: str,
    value: object,
    where: str,
    *,
    minimum: int = 0,
    maximum: int | None = None,
    meaning: str = "",
    error: type[InvalidArgumentError] = InvalidArgumentError,
) -> int:
    """``value`` if it is an int (not a bool) from ``minimum`` to ``maximum``; ``meaning``
    (a few words on what the number counts) is added to the message."""
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        raise error(
            f"invalid {name}={value!r} for {where}:"
            f" expected {_a_whole_number(minimum, maximum, meaning)}"
        )
    return value


def parse_whole_number(
    text: str,
    *,
    minimum: int = 0,
    maximum: int | None = None,
    meaning: str = "",
    base: int = 10,
) -> int:
    """The whole number ``text`` spells (``base=0``: also ``0x...``), from ``minimum`` to
    ``maximum``. The message says only what is accepted (``expected a whole number >= 1
    (...)``): the caller knows the setting's name and where the text came from."""
    try:
        value = int(text.strip(), base)
    except ValueError:
        value = None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        raise InvalidArgumentError(f"expected {_a_whole_number(minimum, maximum, meaning)}")
    return value


def _a_whole_number(minimum: int, maximum: int | None, meaning: str) -> str:
    """``a whole number >= 1 (an access point)``, ``a whole number from 0 to 9``."""
    accepted = (
        f"a whole number from {minimum} to {maximum}"
        if maximum is not None
        else f"a whole number >= {minimum}"
    )
    return accepted + (f" ({meaning})" if meaning else "")


def seconds(
    name: str,
    value: object,
    where: str,
    *,
    positive: bool = False,
    error: type[InvalidArgumentError] = InvalidArgumentError,
) -> float:
    """``value`` as a float if it is a finite number of seconds, >= 0 (> 0 with ``positive``)."""
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        kind = "a positive" if positive else "a non-negative"
        raise error(f"invalid {name}={value!r} for {where}: expected {kind} number of seconds")
    return float(value)


__all__ = ["parse_whole_number", "seconds", "whole_number"]
