"""Shared helpers of the test suite.

The plugin is tested as users run it: pytester writes a test file and runs pytest with
``-p startup_guard`` (plugin autoloading off, so the plugin under test is the one asked for).
"""

from __future__ import annotations

import pytest


@pytest.fixture
def guard_pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester whose inner runs load only the plugins they name (``-p startup_guard``)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name in (
        "STARTUP_GUARD_TARGET",
        "STARTUP_GUARD_SEED",
        "STARTUP_GUARD_TIMEOUT",
        "STARTUP_GUARD_REPORT",
        "STARTUP_GUARD_ARTIFACTS",
        "STARTUP_GUARD_STRICT_RERUNS",
        "STARTUP_GUARD_STRESS",
        "PYTEST_ADDOPTS",
    ):
        monkeypatch.delenv(name, raising=False)
    return pytester
