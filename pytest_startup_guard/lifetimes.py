"""The objects the plugin's fixtures give live as long as their test.

A ``hub_cache``, ``hub_race`` or ``server_fleet`` kept in a global and used by a later test
went on working: its folders were the ended test's, its races and processes were closed, and
what it did belonged to no test. Its fixture calls ``end_lifetime`` on an object of a class marked
``@lives_for_its_test`` at teardown; from then on every public method and property of the
object, called by the user's code, raises ``ExpiredFixtureError`` naming the fixture, the test
it belonged to and the call. The plugin's own code (its report, written after teardown) still
reads the object: a call is refused only where its caller is outside this package.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from pytest_startup_guard.errors import ExpiredFixtureError

_Class = TypeVar("_Class", bound=type)
_PACKAGE = __name__.rpartition(".")[0] + "."
_ENDED = "_startup_guard_ended_by"  # (fixture, test) once the test ended


def lives_for_its_test(cls: _Class) -> _Class:
    """Give ``cls`` ``end_lifetime(fixture, test)``, and have its public methods and properties
    refuse the user's calls after it (see the module's docs)."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") and name != "__call__":  # import_race(...) is a call
            continue
        if isinstance(member, property) and member.fget is not None:
            guarded = _guarded(member.fget, name, call=False)
            setattr(cls, name, property(guarded, member.fset, member.fdel, member.__doc__))
        elif callable(member) and not isinstance(member, (type, staticmethod, classmethod)):
            setattr(cls, name, _guarded(member, name, call=True))
    setattr(cls, _ENDED, None)
    return cls


def end_lifetime(value: object, fixture: str, test: str) -> None:
    """From now on the user's calls of ``value`` (of a ``@lives_for_its_test`` class) are
    refused: ``fixture`` of ``test`` ended."""
    setattr(value, _ENDED, (fixture, test))


def ended_by(value: object) -> tuple[str, str] | None:
    """The fixture and the test whose end ``value`` outlived, or None while it lives."""
    found = getattr(value, _ENDED, None)
    return found if isinstance(found, tuple) else None


def _guarded(function: Callable[..., Any], name: str, *, call: bool) -> Callable[..., Any]:
    @functools.wraps(function)
    def guarded(self: object, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # a failing check's traceback shows the user's call, not this
        ended = getattr(self, _ENDED)
        if ended is not None and not _called_by_the_plugin():
            fixture, test = ended
            used = f"{fixture}.{name}" + ("()" if call else "")
            used = f"{fixture}(...)" if name == "__call__" else used
            raise ExpiredFixtureError(
                f"{fixture} of {test} was used after that test ended ({used}): the object a"
                f" fixture gives lives as long as its test; ask for {fixture} in the test that"
                " uses it, rather than keeping it"
            )
        return function(self, *args, **kwargs)

    return guarded


def _called_by_the_plugin() -> bool:
    """Whether the guarded call came from this package's code (two frames up: past the
    guard)."""
    caller = sys._getframe(2).f_globals.get("__name__", "")
    return isinstance(caller, str) and caller.startswith(_PACKAGE)
