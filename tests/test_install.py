"""The entry point and the ``.pth`` boot line work for an editable install and for a wheel.

The test suite itself runs on the editable install (``make test``); the wheel case builds the
project offline (``pip wheel --no-build-isolation --no-index``), installs it into a fresh venv
that borrows the test venv's dependencies, and runs a user's test there: the plugin must load
from the wheel, and the child runtime must reach a console script and its spawn child.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from test_child_runtime import HELPERS
from user_env import user_env

import pytest_startup_guard

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIR = Path(pytest_startup_guard.__file__).resolve().parent
BOOT_LINE = (PACKAGE_DIR / "startup_guard_boot.pth").read_text().strip()

# The child runtime suite's own helpers (the ``toggled`` fixture, PROBE), and one user's test.
USERS_TEST = HELPERS + textwrap.dedent(
    """

    import pytest_startup_guard

    def test_plugin_and_child_runtime_come_from_the_install(toggled, child_runtime, tmp_path):
        assert Path(pytest_startup_guard.__file__).resolve().parent == Path(os.environ["EXPECTED_PACKAGE"])
        repo, pointer, restore = toggled
        out = tmp_path / "seen.json"
        command = [PROBE, "--loop", str(repo.ref()), str(pointer), str(restore), "3",
                   "--via", "spawn", "--out", str(out)]
        subprocess.run(command, check=True, timeout=120)
        result = json.loads(out.read_text())
        assert result["seen"] == [[False, True]] * 3
        assert child_runtime.processes[result["identity"]["pid"]].ancestry
    """
)


def _site_packages(venv: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))


def _wheel_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh venv holding the project's wheel; its dependencies come from the test venv."""
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, REPO],
        check=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("pytest_startup_guard-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [*pip, "--python", python, "install", "--no-deps", "--no-index", wheel],
        check=True,
        timeout=300,
    )
    # A path line, not a site dir: the test venv's own .pth files (the editable finder, its
    # boot line) are not run there, so the wheel's copy is the only one this venv sees.
    borrowed = _site_packages(Path(sys.prefix))
    (_site_packages(venv) / "borrowed_test_venv.pth").write_text(f"{borrowed}\n")
    return python, _site_packages(venv) / "pytest_startup_guard"


@pytest.mark.parametrize("install", ["editable", "wheel"])
def test_entry_point_and_boot_line_work(
    install: str, pytester: pytest.Pytester, tmp_path: Path
) -> None:
    if install == "editable":
        python, expected = Path(sys.executable), PACKAGE_DIR
        assert PACKAGE_DIR.parent == REPO, "the test venv should hold an editable install"
    else:
        python, expected = _wheel_venv(tmp_path)
        assert (expected / "runtime" / "boot.py").is_file()
    installed_pth = expected.parent / "startup_guard_boot.pth"
    if install == "editable":
        installed_pth = _site_packages(Path(sys.prefix)) / "startup_guard_boot.pth"
    assert installed_pth.read_text().strip() == BOOT_LINE
    assert "pytest_startup_guard.runtime.boot" in BOOT_LINE
    pytester.makepyfile(test_users=USERS_TEST)
    env = user_env()
    env.update(EXPECTED_PACKAGE=str(expected), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    result = subprocess.run(
        [python, "-m", "pytest", "-p", "startup_guard", "-q", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
