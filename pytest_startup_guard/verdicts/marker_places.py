"""Where a ``startup_races`` marker was written (``GivenMarker``; a test takes one:
``the_one_marker``), and the one place the plugin cannot read it.

pytest puts a marker on a function, a class, a module's ``pytestmark`` or a
``pytest.param(..., marks=...)``. The first three reach ``pytest_generate_tests``, where the
test's cases are made; a ``pytest.param``'s marks reach only the test it makes, after that.
Such a marker is checked as any other (a misspelt race is named, not dropped) and then refused:
it would otherwise never make a case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from pytest_startup_guard.errors import StartupGuardError


@dataclass(frozen=True)
class GivenMarker:
    """One ``startup_races`` marker a test carries, and where it was written."""

    place: str  # "on the function", "on class TestX", "on module test_x.py"
    args: tuple[object, ...]
    kwargs: dict[str, object]

    def describe(self) -> str:
        written = [repr(arg) for arg in self.args]
        written += [f"{key}={value!r}" for key, value in self.kwargs.items()]
        return f"startup_races({', '.join(written)}) {self.place}"


def the_one_marker(markers: Sequence[GivenMarker], where: str) -> GivenMarker:
    """The test's one ``startup_races`` marker. Two (on the function and its class, or twice
    on the function) are refused rather than merged: the closest would win and the other's
    cases would silently not run, and merging would have to guess whose ``hold=``,
    ``trigger=`` and ``explore=`` the other's cases take."""
    if len(markers) == 1:
        return markers[0]
    listed = "; ".join(marker.describe() for marker in markers)
    raise StartupGuardError(
        f"{where} has {len(markers)} startup_races markers ({listed}): a test takes one."
        " Write every case in one marker (startup_races(transient=[...], corrupt=[...],"
        " stale=[...], rebuild=[...])), or split the test"
    )


def marker_place(node: object, test: object) -> str:
    """Where a marker of ``test`` was written (``node``: the test or a collector above it)."""
    if node is test:
        return "on the function"
    if isinstance(node, pytest.Class):
        return f"on class {node.name}"
    if isinstance(node, pytest.Module):
        return f"on module {node.name}"
    return f"on {getattr(node, 'nodeid', '') or getattr(node, 'name', 'a collector')}"


def param_marker_problem(item: pytest.Item) -> str | None:
    """Why ``item``'s ``startup_races`` marker given in ``pytest.param(..., marks=...)`` is
    refused (its arguments' own error where they are wrong), or None when it has none."""
    callspec = getattr(item, "callspec", None)
    marks = [mark for mark in getattr(callspec, "marks", ()) if mark.name == "startup_races"]
    if not marks:
        return None
    from pytest_startup_guard.verdicts.cases import cases_from_marker  # where there is one

    where = f"@pytest.mark.startup_races in pytest.param(marks=...) of {item.nodeid}"
    for mark in marks:
        try:
            cases_from_marker(mark.args, dict(mark.kwargs), where)
        except StartupGuardError as error:
            return str(error)
    return (
        f"{where}: the plugin makes a test's startup_races cases when pytest collects its"
        " function, before a pytest.param's marks reach the test, so this marker would make no"
        " case; write it on the function, its class or its module (one marker a test)"
    )


def refuse_param_markers(items: list[pytest.Item]) -> None:
    """Each test of ``items`` with a ``startup_races`` marker in a ``pytest.param`` becomes a
    collection error that says why, and is removed (in place)."""
    kept = []
    for item in items:
        problem = param_marker_problem(item)
        if problem is None:
            kept.append(item)
            continue
        report = pytest.CollectReport(item.nodeid, "failed", longrepr=problem, result=[])
        item.ihook.pytest_collectreport(report=report)
    items[:] = kept
