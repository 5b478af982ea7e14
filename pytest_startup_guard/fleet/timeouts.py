"""Layered time-outs: the fleet reports first, pytest-timeout is the safety net.

Tests that launch fleets get ``@pytest.mark.timeout(readiness x 4 x launches + 30)`` where the
user configured no time-out at all (marker, ``--timeout``, ``PYTEST_TIMEOUT`` or the ``timeout`` ini
key): the user's word wins. A user time-out shorter than the readiness time-out gets a warning,
because pytest-timeout would then kill the test before the fleet could say what went wrong.
The factor 4 is ``MAX_STRETCH``: on a busy machine a fleet may take that many times its readiness
time-out in wall time before it calls a member hung or undecided (``runtime/own_time.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from pytest_startup_guard.runtime.own_time import MAX_STRETCH

MARGIN_SECONDS = 30.0
FLEET_FIXTURES = ("server_fleet", "startup_case")


def count_launches(function: Callable[..., object] | None) -> int:
    """``.launch(`` calls in the test function's source (at least 1; a loop counts once)."""
    if function is None:
        return 1
    import ast  # only for fleet tests without a time-out of their own: keep plugin import cheap
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return 1
    calls = sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "launch"
    )
    return max(1, calls)


def _as_seconds(value: object) -> float | None:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return seconds


def global_timeout(config: pytest.Config) -> tuple[float, str] | None:
    """pytest-timeout's own setting for the run, by its precedence, with where it came from."""
    cli = _as_seconds(config.getoption("timeout", None))
    if cli is not None:
        return cli, "--timeout"
    env = _as_seconds(os.environ.get("PYTEST_TIMEOUT"))
    if env is not None:
        return env, "PYTEST_TIMEOUT"
    try:
        ini = _as_seconds(config.getini("timeout"))
    except ValueError:
        ini = None
    if ini is not None:
        return ini, "the timeout ini key"
    return None


def apply_timeout_marks(
    config: pytest.Config, items: list[pytest.Item], readiness: float
) -> list[str]:
    """Add the safety-net mark where the user set none; return warnings for short user ones."""
    if not config.pluginmanager.hasplugin("timeout"):
        return []
    warnings = []
    configured = global_timeout(config)
    for item in items:
        if not any(name in getattr(item, "fixturenames", ()) for name in FLEET_FIXTURES):
            continue
        marker = item.get_closest_marker("timeout")
        if marker is not None:
            user = _as_seconds(marker.args[0] if marker.args else marker.kwargs.get("timeout"))
            where = "its timeout marker"
        elif configured is not None:
            user, where = configured
        else:
            launches = count_launches(getattr(item, "function", None))
            item.add_marker(
                pytest.mark.timeout(readiness * MAX_STRETCH * launches + MARGIN_SECONDS)
            )
            continue
        if user is not None and 0 < user < readiness:
            warnings.append(
                f"{item.nodeid}: pytest-timeout's {user:g} s ({where}) is shorter than the fleet"
                f" readiness time-out {readiness:g} s: pytest-timeout will end the test before the"
                " fleet can report which server failed and why"
            )
    return warnings
