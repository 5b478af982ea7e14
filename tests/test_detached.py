"""Nothing outlives a test, also what detached itself from its tree.

A member (or a start-up, or a module the import-race probe imports) that leaves its session
and forks twice, and a shell that puts ``sleep`` in a session of its own, are out of every tree
and group the plugin ends: each carries the run's marker in its environment
(``STARTUP_GUARD_RUN``), by which the fleet's stop, the probe and the start-method checks end
them. Run as users run it: one inner pytest whose later tests look at what the earlier ones'
teardown left. (After kill -9 of pytest: ``test_reaper_folders.py``.)
"""

from __future__ import annotations

import pytest
from benchmark_module import benchmark_module

INNER = """
import json, os, sys
from pathlib import Path

import psutil
import pytest

from detachers import DAEMONIZING, MODULE, launch_detachers, read_pids
from pytest_startup_guard import ready
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.runtime.run_marker import carriers

STATE = Path(os.environ["SG_STATE"])


def running(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_1_members_detach_helpers(server_fleet, tmp_path):
    fleets, pids = launch_detachers(server_fleet, tmp_path)
    members = {fleets[0].servers[0].pid, fleets[1].servers[0].pid}
    assert {pids["py-leader"], pids["sh-leader"]} == members
    for name in ("py-daemon", "sh-setsid"):  # out of the member's session, group and tree
        assert os.getsid(pids[name]) not in members
        assert psutil.Process(pids[name]).ppid() not in members
    assert os.getpgid(pids["sh-orphan"]) == pids["sh-leader"]  # orphaned in the group
    marked = {carrier.pid for fleet in fleets for carrier in carriers(fleet.marker)}
    assert set(pids.values()) <= marked  # every helper carries its fleet's marker
    STATE.write_text(json.dumps({"pids": pids, "markers": [fleet.marker for fleet in fleets]}))


def test_2_the_teardown_ended_every_one():
    state = json.loads(STATE.read_text())
    assert [name for name, pid in state["pids"].items() if running(pid)] == []
    assert [carriers(marker) for marker in state["markers"]] == [[], []]


def test_3_the_import_race_probe_ends_what_an_import_detached(import_race, tmp_path, monkeypatch):
    monkeypatch.setenv("SG_DAEMONS", str(tmp_path))
    Path("detaching_module.py").write_text(MODULE)
    import_race("detaching_module", delays=[0.0], orders=["background first"])
    daemons = [int(path.read_text()) for path in tmp_path.glob("*-daemon.pid")]
    assert len(daemons) >= 3  # the import measured alone twice, then raced once
    assert [pid for pid in daemons if running(pid)] == []


def test_4_the_start_method_check_ends_what_a_start_up_detached(start_methods, tmp_path):
    startup = [sys.executable, "-c", DAEMONIZING, str(tmp_path), "start", "exit"]
    start_methods.check(startup, methods=["spawn"]).assert_safe()
    pids = read_pids(tmp_path, ["start-leader", "start-daemon"])
    assert [name for name, pid in pids.items() if running(pid)] == []


def test_5_an_assertion_after_stop_is_an_error(server_fleet):
    code = "import time; print('up', flush=True); time.sleep(60)"
    fleet = server_fleet.launch([sys.executable, "-c", code], ready=ready.log("up"))
    fleet.stop()
    for call in ("assert_all_ready()", "assert_all_failed()"):
        with pytest.raises(StartupGuardError) as raised:
            getattr(fleet, call[:-2])()
        message = str(raised.value)
        assert f"fleet.{call} was called after fleet.stop()" in message
        assert f"call fleet.{call} before fleet.stop()" in message
"""


def test_nothing_a_test_started_outlives_it_also_what_detached_itself(
    guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # detachers.py (benchmarks/trust_kill.py) next to the inner tests.
    benchmark_module("trust_kill").write_detachers(guard_pytester.path)
    guard_pytester.makepyfile(test_inner=INNER)
    monkeypatch.setenv("SG_STATE", str(guard_pytester.path / "state.json"))
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
