"""Reruns must not hide races.

A rerun of a race test defeats its purpose: the race that failed it on the first attempt is
gone on the second, and pytest-rerunfailures reports the test green. So start-up tests (those
using ``hub_race``, ``server_fleet`` or ``startup_case``) get ``@pytest.mark.flaky(reruns=0)``,
which beats a global ``--reruns``, unless

- the test has a ``flaky`` mark of its own (the user's word wins),
- ``startup_guard_allow_reruns`` is true (per target too), or
- pytest-rerunfailures is not active (the mark would then break ``--strict-markers``).

``--force-reruns`` and ``--reruns-mode=append`` are pytest-rerunfailures' own explicit words
and still rerun; whatever a rerun hid is listed in the summary and the JSON report, and
``--startup-guard-strict-reruns`` fails such a run.
"""

from __future__ import annotations

import pytest

from pytest_startup_guard.report.record import is_startup_test

RERUNFAILURES_NAMES = ("rerunfailures", "pytest_rerunfailures")  # entry point, -p module name


def rerunfailures_active(config: pytest.Config) -> bool:
    return any(config.pluginmanager.hasplugin(name) for name in RERUNFAILURES_NAMES)


def apply_no_rerun_marks(config: pytest.Config, items: list[pytest.Item], allowed: bool) -> int:
    """Mark start-up tests without a ``flaky`` mark ``flaky(reruns=0)``; return how many."""
    if allowed or not rerunfailures_active(config):
        return 0
    marked = 0
    for item in items:
        if is_startup_test(item) and item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=0))
            marked += 1
    return marked


def attempt_of(item: pytest.Item) -> int:
    """0 for the first run of a test, N for its N-th rerun (pytest-rerunfailures counts)."""
    count = getattr(item, "execution_count", None)
    return count - 1 if isinstance(count, int) and count > 0 else 0


def fail_on_hidden(session: pytest.Session, hidden: int, strict: bool) -> bool:
    """With ``--startup-guard-strict-reruns``, a run that is otherwise green fails when a rerun
    hid a start-up test's failure. Returns whether it changed the exit status."""
    if strict and hidden and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return True
    return False
