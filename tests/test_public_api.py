"""Users import public names from ``pytest_startup_guard``; deep paths of the flat layout that
moved into sub-packages keep importing, with a deprecation warning, until they go."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import pytest_startup_guard
from pytest_startup_guard import _moved

PACKAGE_DIR = Path(pytest_startup_guard.__file__).resolve().parent
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", pytest_startup_guard.__all__)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(pytest_startup_guard, name)
    assert value is not None
    assert name in dir(pytest_startup_guard)


def test_ready_is_the_fleets_readiness_module() -> None:
    from pytest_startup_guard import ready
    from pytest_startup_guard.fleet import ready as fleet_ready

    assert ready is fleet_ready
    assert callable(ready.http)


def test_unknown_public_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'FakeHubCash'"):
        _ = pytest_startup_guard.FakeHubCash  # type: ignore[attr-defined]


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_every_moved_path_points_at_an_existing_module(old: str) -> None:
    new = _moved.new_name(f"pytest_startup_guard.{old}")
    assert new is not None
    relative = Path(*new.split(".")[1:]).with_suffix(".py")
    assert (PACKAGE_DIR / relative).is_file(), new
    assert not (PACKAGE_DIR / f"{old}.py").exists(), f"{old}.py is back at the root"


def test_an_old_path_is_the_same_module_with_a_deprecation_warning() -> None:
    result = run_python(
        "import pytest_startup_guard.hubcache as old, pytest_startup_guard.cache.hubcache as new;"
        " print(old is new, old.FakeHubCache is new.FakeHubCache)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True True"
    assert "DeprecationWarning: pytest_startup_guard.hubcache moved to" in result.stderr
    assert "pytest_startup_guard.cache.hubcache" in result.stderr
    assert "goes in 0.3" in result.stderr


def test_the_public_ready_module_keeps_its_old_path_quietly() -> None:
    result = run_python("import pytest_startup_guard.ready as r; print(r.__name__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "pytest_startup_guard.fleet.ready"
    assert "DeprecationWarning" not in result.stderr


def test_an_unknown_deep_path_is_still_not_found() -> None:
    result = run_python("import pytest_startup_guard.hubcash")
    assert result.returncode == 1
    assert "No module named 'pytest_startup_guard.hubcash'" in result.stderr


def test_old_scan_command_runs_like_the_new_one() -> None:
    target = str(EXAMPLES / "imports" / "acme_server")
    new = subprocess.run(
        [sys.executable, "-m", "pytest_startup_guard.imports.scan", target],
        capture_output=True,
        text=True,
        timeout=120,
    )
    old = subprocess.run(
        [sys.executable, "-m", "pytest_startup_guard.importscan", target],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert new.returncode == old.returncode == 1  # the example has errors on purpose
    assert "background imports under" in new.stdout
    assert old.stdout == new.stdout
    assert "python -m pytest_startup_guard.importscan is deprecated" in old.stderr
    assert "python -m pytest_startup_guard.importscan is deprecated" not in new.stderr
