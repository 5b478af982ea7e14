"""What the target markers mean on a runner: ``@pytest.mark.cpu``, ``cuda``, ``rocm``.

A marked test runs only where the target is among its marks and is skipped elsewhere with a
reason naming both; unmarked tests run everywhere; marker arguments are an error at collection.
Where the suite registers a target marker of its own, the plugin warns and leaves tests carrying
it alone unless the target was set explicitly (command line, environment or ini key).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pytest_startup_guard.targets.detection import TARGETS

if TYPE_CHECKING:
    import pytest


def registered_elsewhere(marker_lines: Iterable[str], own_suffix: str) -> frozenset[str]:
    """Target markers that the suite itself (its ini file, a conftest, another plugin) registers.

    The plugin's own ``markers`` lines end with ``own_suffix``; any other line naming cpu, cuda
    or rocm is someone else's registration (parsed as pytest does: the name before ``:``/``(``).
    """
    suffix = own_suffix.strip()
    names = {
        line.split(":", 1)[0].split("(", 1)[0].strip()
        for line in marker_lines
        if not line.rstrip().endswith(suffix)
    }
    return frozenset(names & set(TARGETS))


def skip_reason(needed: Iterable[str], target: str) -> str:
    """``needs rocm; this runner is cuda`` / ``needs cuda or rocm; this runner is cpu``."""
    names = [name for name in TARGETS if name in set(needed)]
    return f"needs {' or '.join(names)}; this runner is {target}"


def marker_argument_problem(mark: pytest.Mark) -> str | None:
    """Why a target mark's arguments are wrong (they take none), or None when it has none."""
    if not mark.args and not mark.kwargs:
        return None
    written = ", ".join(
        [repr(arg) for arg in mark.args]
        + [f"{key}={value!r}" for key, value in mark.kwargs.items()]
    )
    found = [f"unexpected argument {arg!r}" for arg in mark.args]
    found += [f"unknown keyword {key!r}" for key in mark.kwargs]
    return (
        f"@pytest.mark.{mark.name}({written}): the target markers cpu, cuda and rocm take no"
        f" arguments ({', '.join(found)}); write @pytest.mark.{mark.name}, and stack target"
        " markers for a test that runs on several targets"
    )


def select_by_target(
    config: pytest.Config,
    items: list[pytest.Item],
    target: str,
    *,
    explicit: bool,
    own_suffix: str,
) -> None:
    """Apply the target markers to collected ``items`` (in place).

    A test whose target marks do not include ``target`` gets a skip mark naming both; a test
    whose target marks carry arguments becomes a collection error and is removed. Target
    markers the suite registers itself are left to the suite (never validated; tests carrying
    one are not skipped unless the target is ``explicit``), with one warning per run.
    """
    import pytest

    theirs = registered_elsewhere(config.getini("markers"), own_suffix)
    if theirs:
        warnings.warn(
            pytest.PytestConfigWarning(_theirs_message(theirs, target, explicit)), stacklevel=2
        )
    kept: list[pytest.Item] = []
    for item in items:
        marks = [mark for mark in item.iter_markers() if mark.name in TARGETS]
        problems = [
            problem
            for mark in marks
            if mark.name not in theirs
            for problem in [marker_argument_problem(mark)]
            if problem is not None
        ]
        if problems:
            report = pytest.CollectReport(
                item.nodeid, "failed", longrepr=_collection_error(item, problems), result=[]
            )
            item.ihook.pytest_collectreport(report=report)
            continue
        kept.append(item)
        needed = {mark.name for mark in marks}
        if not needed or target in needed or (needed & theirs and not explicit):
            continue
        item.add_marker(pytest.mark.skip(reason=skip_reason(needed, target)))
    items[:] = kept


def _collection_error(item: pytest.Item, problems: list[str]) -> str:
    # The node id makes each report distinct: pytest-xdist shows one per distinct text.
    return "\n".join([*dict.fromkeys(problems), f"(in {item.nodeid})"])


def _theirs_message(theirs: frozenset[str], target: str, explicit: bool) -> str:
    names = [name for name in TARGETS if name in theirs]
    listed = " and ".join(repr(name) for name in names)
    marked = " or ".join(names)
    own = f"this suite registers its own {listed} marker{'s' if len(names) > 1 else ''}"
    if explicit:
        return (
            f"startup-guard: {own}; the target was set explicitly ({target}), so startup-guard"
            f" also skips tests marked {marked} where {target} is not among their target marks"
        )
    return (
        f"startup-guard: {own}; startup-guard leaves tests marked {marked} alone. Set the"
        " target (--startup-target, STARTUP_GUARD_TARGET or startup_guard_target) to have it"
        " skip them by target"
    )
