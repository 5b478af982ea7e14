"""The reaper removes the child runtime's plan folders (``sg-*``) when pytest dies without its
teardown, after it ended the fleet; and it refuses every folder that is not a plan folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from user_env import user_env

from pytest_startup_guard.fleet import reaper as reaper_module
from pytest_startup_guard.fleet.reaper import Reaper, folder_allowed

REAPER = [sys.executable, "-m", "pytest_startup_guard.fleet.reaper"]


@pytest.fixture
def short_temp() -> Iterator[Path]:
    """A private temp dir short enough that the controller makes its plans in it (<= 60)."""
    folder = Path(tempfile.mkdtemp(prefix="sgt-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def wait_until(check: object, within: float) -> bool:
    assert callable(check)
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# -- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/T/sg-abc123", True),
        ("/T/sg-x", True),
        ("/T/sg-", False),  # the prefix alone is no mkdtemp name
        ("/T/pytest-of-me", False),
        ("/T/xsg-abc", False),
        ("/T/sub/sg-abc", False),  # not directly under the temp dir
        ("/T/sg-abc/inner", False),
        ("/T/sg-abc/", False),  # not normalised
        ("/T/./sg-abc", False),
        ("/T/../T/sg-abc", False),
        ("/T//sg-abc", False),
        ("/other/sg-abc", False),
        ("/sg-abc", False),
        ("/", False),
        ("T/sg-abc", False),  # relative
        ("sg-abc", False),
        ("", False),
        ("/T/sg-a\0b", False),
    ],
)
def test_only_sg_folders_straight_in_the_temp_dir_are_allowed(path: str, allowed: bool) -> None:
    assert folder_allowed(path, ["/T"]) is allowed


def test_a_temp_dir_must_be_absolute() -> None:
    assert not folder_allowed("/sg-abc", [""])
    assert not folder_allowed("T/sg-abc", ["T"])
    assert folder_allowed("/T/sg-abc", ["/T/"])  # the temp dir is normalised, the path is not


def test_the_reaper_refuses_folders_outside_its_rule_and_survives_bad_lines(
    tmp_path: Path,
) -> None:
    temp = tmp_path / "temp"
    outside = tmp_path / "outside"
    plan, kept, unregistered = temp / "sg-plan", temp / "sg-kept", temp / "sg-never-told"
    victims = [outside / "sg-victim", temp / "not-a-plan", temp / "sg-plan-of-a-link-target"]
    for folder in [plan, kept, unregistered, *victims]:
        folder.mkdir(parents=True)
        (folder / "file").write_text("x")
    (plan / "dumps").mkdir()
    (plan / "dumps" / "1.txt").write_text("x")
    link = temp / "sg-link"
    link.symlink_to(victims[0], target_is_directory=True)
    lines = [
        "garbage",
        "",
        "add not-a-pid 1.0 2",
        "add 1 2",
        "remove x",
        "folder",  # refused: no path
        f"folder {plan}",
        f"folder {kept}",
        f"unfolder {kept}",
        f"folder {victims[0]}",
        f"folder {victims[1]}",
        f"folder {temp}/../temp/sg-plan-of-a-link-target",
        f"folder {link}",  # allowed by name, but a symlink is never followed nor removed
        "folder sg-relative",
        "unfolder /never/registered",
    ]
    completed = subprocess.run(
        [*REAPER, "--temp-dir", str(temp)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert not plan.exists()
    assert kept.exists() and unregistered.exists()
    assert all((victim / "file").exists() for victim in victims)
    assert link.is_symlink()
    assert completed.stderr.count("refused folder") == 5
    assert completed.stderr.count("skipped a line") == 5
    assert "Traceback" not in completed.stderr


def test_a_folder_is_removed_after_the_trees_end(tmp_path: Path) -> None:
    """A process of a registered tree writing into the plan folder until it is ended: the folder
    is removed after that, so nothing comes back into it."""
    temp = tmp_path / "temp"
    plan = temp / "sg-plan"
    plan.mkdir(parents=True)
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "while True:\n"
            "    open(sys.argv[1] + '/dumps-' + str(time.monotonic_ns()), 'w').close()\n"
            "    time.sleep(0.01)\n",
            str(plan),
        ],
        start_new_session=True,
    )
    try:
        assert wait_until(lambda: any(plan.iterdir()), 30)
        process = psutil.Process(writer.pid)
        line = f"add {writer.pid} {process.create_time()} {os.getpgid(writer.pid)}\n"
        completed = subprocess.run(
            [*REAPER, "--temp-dir", str(temp)],
            input=f"{line}folder {plan}\n",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        assert writer.wait(timeout=10) == -signal.SIGTERM
        assert not plan.exists()
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()


def test_the_pytest_side_registers_and_unregisters(
    short_temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``remove_folder`` after a normal close: the reaper leaves the folder alone; a folder
    still registered when pytest ends is removed at the end, too."""
    monkeypatch.setattr(tempfile, "tempdir", str(short_temp))
    assert reaper_module.plan_temp_dirs() == [str(short_temp)]
    released, still = short_temp / "sg-released", short_temp / "sg-still"
    released.mkdir()
    still.mkdir()
    reaper = Reaper()
    reaper.add_folder(released)
    reaper.add_folder(still)
    reaper.remove_folder(released)
    reaper.close()
    assert released.exists()
    assert not still.exists()


# -- kill -9 of pytest, as users run it -------------------------------------------------------

INNER = """
import json, os, sys, time
from pathlib import Path
import psutil
from pytest_startup_guard import ready

CODE = "import time; print('up', flush=True); time.sleep(300)"


def tell(child_runtime, pids):
    out = Path(os.environ["SG_TOLD"])
    part = out.with_suffix(".part")
    part.write_text(json.dumps({"folder": str(child_runtime.folder), "pids": sorted(pids)}))
    os.replace(part, out)


def test_fleet(child_runtime, server_fleet):
    fleet = server_fleet.launch([sys.executable, "-c", CODE], count=2, ready=ready.log("up"))
    fleet.assert_all_ready()
    pids = set()
    for server in fleet.servers:
        pids.add(server.pid)
        pids |= {child.pid for child in psutil.Process(server.pid).children(recursive=True)}
    tell(child_runtime, pids)
    time.sleep(300)


def test_runtime_only(child_runtime):
    tell(child_runtime, [])
    time.sleep(300)
"""


@pytest.mark.parametrize("which", ["fleet", "runtime_only"])
def test_kill_9_of_pytest_leaves_no_process_and_no_plan_folder(
    guard_pytester: pytest.Pytester, short_temp: Path, which: str
) -> None:
    guard_pytester.makepyfile(test_inner=INNER)
    told = guard_pytester.path / "told.json"
    env = {
        **user_env(),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "TMPDIR": str(short_temp),
        "SG_TOLD": str(told),
    }
    command = [sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "no:cacheprovider"]
    command += [f"--basetemp={guard_pytester.path / 'basetemp'}", "-k", which, "test_inner.py"]
    pytest_process = subprocess.Popen(
        command,
        cwd=guard_pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        if not wait_until(lambda: told.exists() or pytest_process.poll() is not None, 60):
            pytest.fail("the inner test never got going")
        if not told.exists():
            output = pytest_process.communicate(timeout=30)[0].decode()
            pytest.fail(f"the inner pytest ended early:\n{output}")
        state = json.loads(told.read_text())
        folder = Path(state["folder"])
        pids: list[int] = state["pids"]
        assert folder.parent == short_temp and folder.name.startswith("sg-")
        assert (folder / "ctl.sock").exists()
        assert len(pids) >= (2 if which == "fleet" else 0)
        reapers = [
            child.pid
            for child in psutil.Process(pytest_process.pid).children()
            if "pytest_startup_guard.fleet.reaper" in " ".join(child.cmdline())
        ]
        assert len(reapers) == 1
        # In runtime_only, the plan folder's registration alone started the reaper.
        pytest_process.send_signal(signal.SIGKILL)
        pytest_process.wait(timeout=30)
    finally:
        if pytest_process.poll() is None:
            pytest_process.kill()
            pytest_process.wait()
        assert pytest_process.stdout is not None
        pytest_process.stdout.close()

    def gone() -> bool:
        return not any(alive(pid) for pid in [*pids, *reapers]) and not folder.exists()

    wait_until(gone, 20)
    assert not [pid for pid in [*pids, *reapers] if alive(pid)], "processes survived kill -9"
    assert not folder.exists(), f"the plan folder survived kill -9: {sorted(folder.rglob('*'))}"
    assert sorted(short_temp.iterdir()) == [], "something was left in the temp dir"
