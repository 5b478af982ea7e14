"""Checks of a user's argument, shared by every part: one wording for one kind of mistake.

Each raises ``InvalidArgumentError`` (a ``StartupGuardError`` and a ``ValueError``), or the
subclass of it a part names with ``error=``, whose message names the argument, the value, where
it was given and what is accepted:
``invalid count=0 for server_fleet.launch(): expected a whole number >= 1``. A value of the
wrong type raises ``ArgumentTypeError``, which is also a ``TypeError``.
``parse_whole_number`` reads such a number from text (a command line, an ini file, the
environment), where the caller names the setting and where it came from; ``parse_pair`` two of
them (``STEP:POINT``), for the settings and the writer exploration alike.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError

_Kind = TypeVar("_Kind")
_SHOWN = 80  # characters of a bad value a message quotes: a whole file's text helps nobody


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


def parse_pair(text: str) -> tuple[int, int]:
    """``STEP:POINT`` of ``server_fleet.explore_writer``: two whole numbers from 1 (``"3:1"``
    -> ``(3, 1)``), read from the ``--startup-guard-writer-pair`` option or its variable."""
    step, colon, point = text.partition(":")
    if not colon:
        raise ValueError("expected STEP:POINT, two whole numbers from 1, e.g. 3:1")
    return (
        parse_whole_number(step, minimum=1, meaning="a writer step (STEP:POINT)"),
        parse_whole_number(point, minimum=1, meaning="a reader point (STEP:POINT)"),
    )


def _a_whole_number(minimum: int, maximum: int | None, meaning: str) -> str:
    """``a whole number >= 1 (an access point)``, ``a whole number from 0 to 9``."""
    accepted = (
        f"a whole number from {minimum} to {maximum}"
        if maximum is not None
        else f"a whole number >= {minimum}"
    )
    return accepted + (f" ({meaning})" if meaning else "")


# The longest time-out, hold or delay a user may give, in seconds: what the layers below can
# arm (pytest-timeout's ``setitimer`` overflows past about 2**31 s, ``threading`` waits past
# ``threading.TIMEOUT_MAX``, and a fleet's safety net is 4 x readiness x launches + 30 s) with
# room to spare. A start-up test that waits longer than a day was given milliseconds, or 1e300.
MAX_SECONDS = 86400.0
UP_TO_A_DAY = f" (at most {MAX_SECONDS:g}: a day)"


def seconds(
    name: str,
    value: object,
    where: str,
    *,
    positive: bool = False,
    error: type[InvalidArgumentError] = InvalidArgumentError,
) -> float:
    """``value`` as a float if it is a finite number of seconds, >= 0 (> 0 with ``positive``),
    at most ``MAX_SECONDS``."""
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
        or value > MAX_SECONDS
    ):
        kind = "a positive" if positive else "a non-negative"
        raise error(
            f"invalid {name}={shown(value)} for {where}: expected {kind} number of seconds"
            f"{UP_TO_A_DAY}"
        )
    return float(value)


def shown(value: object) -> str:
    """``repr(value)``, cut to a length a message can carry."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def flag(name: str, value: object, where: str) -> bool:
    """``value`` if it is a bool: ``allow_miss="no"`` is true, and would mean the opposite."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(
            f"invalid {name}={shown(value)} for {where}: expected True or False"
        )
    return value


def instance(name: str, value: object, kind: type[_Kind], where: str, accepted: str) -> _Kind:
    """``value`` if it is a ``kind``; ``accepted`` says what to pass in the user's words."""
    if not isinstance(value, kind):
        raise ArgumentTypeError(f"invalid {name}={shown(value)} for {where}: expected {accepted}")
    return value


def text(name: str, value: object, where: str, *, meaning: str = "") -> str:
    """``value`` if it is a str that is not empty (nor only blanks)."""
    if not isinstance(value, str):
        raise ArgumentTypeError(
            f"invalid {name}={shown(value)} for {where}: expected a str{_of(meaning)}"
        )
    if not value.strip():
        raise InvalidArgumentError(
            f"invalid {name}={value!r} for {where}: expected a non-empty str{_of(meaning)}"
        )
    return value


def texts(name: str, value: object, where: str, *, meaning: str, empty: bool = True) -> list[str]:
    """``value`` as a list of str: a list, tuple or set of them, not one str (whose letters
    would be taken one by one). ``empty=False`` refuses an empty one."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ArgumentTypeError(
            f"invalid {name}={shown(value)} for {where}: expected a list of {meaning}"
            + (f", such as [{value!r}]" if isinstance(value, str) else "")
        )
    items = list(value)
    for position, item in enumerate(items):
        if not isinstance(item, str):
            raise ArgumentTypeError(
                f"invalid {name}[{position}]={shown(item)} for {where}: expected a str"
                f" (one of the {meaning})"
            )
    if not items and not empty:
        raise InvalidArgumentError(f"invalid {name}=[] for {where}: expected one or more {meaning}")
    return items


def environment(name: str, value: object, where: str) -> dict[str, str]:
    """``value`` as a dict of variable name to value, each a str: what ``subprocess`` takes,
    checked here so that a mistake names the variable rather than failing inside ``Popen``.
    Bytes are refused too: the environment is also shown in messages and reports as text."""
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(
            f"invalid {name}={shown(value)} for {where}: expected a mapping of variable name"
            " to value, such as {'HF_HUB_OFFLINE': '1'}"
        )
    checked: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise InvalidArgumentError(
                f"invalid variable name {shown(key)} in {name}= of {where}: expected a non-empty"
                " str without '=' or NUL"
            )
        if not isinstance(item, str):
            hint = " (decode bytes first: value.decode())" if isinstance(item, bytes) else ""
            hint = hint or (" (write it as a str: str(value))" if isinstance(item, int) else "")
            raise ArgumentTypeError(
                f"invalid {name}[{key!r}]={shown(item)} for {where}: environment values must be"
                f" str{hint}"
            )
        if "\0" in item:
            raise InvalidArgumentError(
                f"invalid {name}[{key!r}]={shown(item)} for {where}: an environment value cannot"
                " hold a NUL character"
            )
        checked[key] = item
    return checked


def pattern(name: str, value: object, where: str) -> str:
    """``value`` if it is a regular expression that compiles."""
    if not isinstance(value, str):
        raise ArgumentTypeError(
            f"invalid {name}={shown(value)} for {where}: expected a regular expression (a str)"
        )
    try:
        re.compile(value)
    except re.error as error:
        raise InvalidArgumentError(
            f"invalid {name}={value!r} for {where}: not a regular expression: {error}"
        ) from None
    return value


def path(name: str, value: object, where: str) -> str:
    """``value`` as a str path, if it is a non-empty str or ``os.PathLike``."""
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentTypeError(
            f"invalid {name}={shown(value)} for {where}: expected a path (str or pathlib.Path)"
        )
    given = os.fspath(value)
    if not isinstance(given, str) or not given.strip():
        raise InvalidArgumentError(
            f"invalid {name}={shown(value)} for {where}: expected a path (a non-empty str or"
            " pathlib.Path)"
        )
    return given


def folder(name: str, value: object, where: str) -> Path:
    """``value`` as a ``Path``, if it names a folder that exists."""
    given = Path(path(name, value, where))
    if not given.exists():
        raise InvalidArgumentError(f"invalid {name}={str(given)!r} for {where}: no such folder")
    if not given.is_dir():
        raise InvalidArgumentError(
            f"invalid {name}={str(given)!r} for {where}: it is a file, expected a folder"
        )
    return given


def function(name: str, value: object, where: str, accepted: str) -> Callable[..., object]:
    """``value`` if it can be called; ``accepted`` says what it is called with."""
    if not callable(value):
        raise ArgumentTypeError(f"invalid {name}={shown(value)} for {where}: expected {accepted}")
    return value


def _of(meaning: str) -> str:
    return f" ({meaning})" if meaning else ""


__all__ = [
    "MAX_SECONDS",
    "UP_TO_A_DAY",
    "environment",
    "flag",
    "folder",
    "function",
    "instance",
    "parse_whole_number",
    "path",
    "pattern",
    "seconds",
    "shown",
    "text",
    "texts",
    "whole_number",
]
