"""Exceptions with messages that name the bad value, where it came from and what is accepted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType


class StartupGuardError(Exception):
    """Base class of every error the plugin raises on purpose."""


class UnsafeCacheError(StartupGuardError):
    """An operation that writes faults was pointed at a cache the plugin may not touch."""


class InvalidArgumentError(StartupGuardError, ValueError):
    """An argument of the public API that is not what it should be (its message names it)."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type (a str where a list is meant, a name where an object is).

    Also a ``TypeError``: code that caught the ``TypeError`` such a mistake raised before keeps
    catching it."""


class NotInCacheError(StartupGuardError, KeyError):
    """A repo, revision or file that a fake hub cache does not hold (its message says what it
    holds). Also a ``KeyError``, which such a lookup raised before."""

    def __str__(self) -> str:
        # KeyError's own str() is the repr of its argument: the message in quotes.
        return str(self.args[0]) if self.args else ""


class ExpiredFixtureError(StartupGuardError, RuntimeError):
    """The object a fixture gave (``hub_cache``, ``server_fleet``, ...) used after its test
    ended (its message names the fixture, the test and the call)."""


class UnknownNameError(StartupGuardError, ValueError):
    """A race, corruption, target or readiness name that is not in its catalog."""

    def __init__(self, kind: str, name: object, known: Iterable[str], where: str = "") -> None:
        import difflib  # only when there is an error to explain

        known_sorted = sorted(known)
        hint = ""
        if isinstance(name, str):
            close = difflib.get_close_matches(name, known_sorted, n=1)
            if close:
                hint = f" (did you mean {close[0]!r}?)"
        origin = f" in {where}" if where else ""
        super().__init__(
            f"unknown {kind} {name!r}{origin}{hint}; known {kind}s: {', '.join(known_sorted)}"
        )
        self.name = name
        self.known = known_sorted


class UnreadableFileError(StartupGuardError, ValueError):
    """A file the plugin reads back (a JSON report, a plan) that is not what it should be: not
    a regular file, too big or too deep, not strict JSON, or not of its schema. The message
    names the file, the field where there is one, and what was expected."""


def without_own_frames(traceback: TracebackType | None) -> TracebackType | None:
    """``traceback`` without the frames of this package's modules: an error the plugin raises
    on purpose is shown at the user's line, its message saying what the frames would."""
    import os  # only where such an error is shown: a child process imports this module
    from pathlib import Path
    from types import TracebackType

    own = str(Path(__file__).resolve().parent) + os.sep
    kept = []
    while traceback is not None:
        if not str(Path(traceback.tb_frame.f_code.co_filename).resolve()).startswith(own):
            kept.append(traceback)
        traceback = traceback.tb_next
    pruned = None
    for entry in reversed(kept):
        pruned = TracebackType(pruned, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return pruned
