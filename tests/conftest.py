"""Shared helpers of the test suite.

The plugin is tested as users run it: pytester writes a test file and runs pytest with
``-p startup_guard`` (plugin autoloading off, so the plugin under test is the one asked for).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from report_schema import reports_under, validate


@pytest.fixture
def guard_pytester(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[pytest.Pytester]:
    """A pytester whose inner runs load only the plugins they name (``-p startup_guard``).

    At teardown every JSON report the inner runs wrote (anywhere under the pytester's folder)
    must hold to the shipped schema: a report field the schema does not describe fails the
    test that produced it."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name in (
        "STARTUP_GUARD_TARGET",
        "STARTUP_GUARD_SEED",
        "STARTUP_GUARD_TIMEOUT",
        "STARTUP_GUARD_REPORT",
        "STARTUP_GUARD_HTML",
        "STARTUP_GUARD_ARTIFACTS",
        "STARTUP_GUARD_STRICT_RERUNS",
        "STARTUP_GUARD_STRESS",
        "STARTUP_GUARD_EXPLORE_POINT",
        "STARTUP_GUARD_WRITER_PAIR",
        "STARTUP_GUARD_EXPLORE_ALL",
        "STARTUP_GUARD_WARM",
        "PYTEST_ADDOPTS",
    ):
        monkeypatch.delenv(name, raising=False)
    yield pytester
    for path in reports_under(pytester.path):
        errors = validate(json.loads(path.read_text()))
        assert not errors, f"{path} does not hold to report-schema.json:\n" + "\n".join(errors[:20])
