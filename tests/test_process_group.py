"""Processes in a session of their own and ending their groups (runtime/process_group.py).

The fleet, the import-race probe and the start-method checks end processes through this one
module; these tests pin down what each signal reaches and when, with small Python leaders.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from waiting import wait_for

from pytest_startup_guard.runtime.process_group import (
    Child,
    Group,
    Verified,
    end_group,
    end_trees,
    led_by,
    session,
    start_session,
)
from pytest_startup_guard.runtime.process_identity import signal_process, start_time
from pytest_startup_guard.runtime.protocol import RUN_ENV
from pytest_startup_guard.runtime.run_marker import new_tree

# A leader that starts a helper in its own group, reports both pids, records every SIGTERM
# each of them receives in a file of its own, and sleeps; ``IGNORE`` says who survives SIGTERM.
LEADER = """
import os, signal, subprocess, sys, time
folder, ignore = sys.argv[1], sys.argv[2].split(",")
def recorder(who):
    def record(number, frame):
        with open(os.path.join(folder, who + ".term"), "a") as out:
            out.write("TERM\\n")
        if who not in ignore:
            sys.exit(0)
    return record
signal.signal(signal.SIGTERM, recorder("leader"))
helper = subprocess.Popen([sys.executable, "-c", HELPER, folder, sys.argv[2]])
while not os.path.exists(os.path.join(folder, "helper.ready")):
    time.sleep(0.01)
print(os.getpid(), helper.pid, flush=True)
if sys.argv[3] == "exit":
    sys.exit(0)
while True:
    time.sleep(1)
"""
HELPER = """
import os, signal, sys, time
folder, ignore = sys.argv[1], sys.argv[2].split(",")
def record(number, frame):
    with open(os.path.join(folder, "helper.term"), "a") as out:
        out.write("TERM\\n")
    if "helper" not in ignore:
        sys.exit(0)
signal.signal(signal.SIGTERM, record)
open(os.path.join(folder, "helper.ready"), "w").close()
while True:
    time.sleep(1)
"""
SCRIPT = textwrap.dedent(LEADER).replace("HELPER", repr(textwrap.dedent(HELPER)))


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def gone_soon(pid: int, seconds: float = 5.0) -> bool:
    """Whether ``pid`` has ended within ``seconds`` (an orphan is reaped by init, not us)."""
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def terms(folder: Path, who: str) -> int:
    """How many SIGTERMs ``who`` (leader, helper) recorded."""
    path = folder / f"{who}.term"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def leader_args(tmp_path: Path) -> list[str]:
    """The leader's argv but for who ignores SIGTERM and whether it stays ("run") or exits."""
    return [sys.executable, "-c", SCRIPT, str(tmp_path)]


def helper_of(process: subprocess.Popen[str]) -> int:
    """The helper's pid, once the helper handles SIGTERM."""
    assert process.stdout is not None
    leader, helper = process.stdout.readline().split()
    assert int(leader) == process.pid
    return int(helper)


def start(leader_args: list[str], ignore: str, then: str) -> tuple[subprocess.Popen[str], int]:
    """A leader (and its helper) in a new session; ``ignore``: who survives SIGTERM."""
    process = start_session([*leader_args, ignore, then], env=dict(os.environ), cwd=None)
    return process, helper_of(process)


def test_start_session_makes_the_process_the_leader_of_a_new_group(
    leader_args: list[str],
) -> None:
    process, helper = start(leader_args, "", "run")
    try:
        leader = process.pid
        assert os.getpgid(leader) == leader == os.getpgid(helper) != os.getpgrp()
        assert os.getsid(leader) == leader
    finally:
        end_group(process)
        process.wait()
    assert gone_soon(helper)


def test_end_group_with_a_grace_sigterms_the_group_once_then_sigkills_what_is_left(
    tmp_path: Path, leader_args: list[str]
) -> None:
    process, helper = start(leader_args, "leader,helper", "run")
    started = time.monotonic()
    end_group(process, grace=0.5)
    waited = time.monotonic() - started
    assert process.wait(5) == -9
    assert 0.5 <= waited < 3, waited
    # The group got SIGTERM once; the leader was not signalled on its own as well.
    assert terms(tmp_path, "leader") == 1
    assert terms(tmp_path, "helper") == 1
    assert gone_soon(helper)


def test_end_group_waits_no_longer_than_the_leader_takes(
    tmp_path: Path, leader_args: list[str]
) -> None:
    # The leader ends on SIGTERM; its helper ignores it and is SIGKILLed with the group.
    process, helper = start(leader_args, "helper", "run")
    started = time.monotonic()
    end_group(process, grace=10)
    assert time.monotonic() - started < 5
    assert process.wait(5) == 0
    assert terms(tmp_path, "helper") == 1
    assert gone_soon(helper)


def test_end_group_without_a_grace_sigkills_at_once(tmp_path: Path, leader_args: list[str]) -> None:
    process, helper = start(leader_args, "", "run")
    end_group(process)
    assert process.wait(5) == -9
    assert terms(tmp_path, "leader") == terms(tmp_path, "helper") == 0
    assert gone_soon(helper)


def test_session_ends_what_the_leader_left_behind(tmp_path: Path, leader_args: list[str]) -> None:
    with session([*leader_args, "", "exit"], env=dict(os.environ), cwd=None, grace=5) as process:
        helper = helper_of(process)
        assert process.wait(5) == 0
        assert alive(helper)
    # The leader had ended: no SIGTERM and no grace, the helper got SIGKILL at once.
    assert terms(tmp_path, "helper") == 0
    assert gone_soon(helper)


def test_session_ends_the_group_when_the_block_fails(leader_args: list[str]) -> None:
    def fail_in_the_block() -> None:
        with session([*leader_args, "", "run"], env=dict(os.environ), cwd=None) as process:
            started.append((process, helper_of(process)))
            raise RuntimeError("the test failed")

    started: list[tuple[subprocess.Popen[str], int]] = []
    with pytest.raises(RuntimeError, match="the test failed"):
        fail_in_the_block()
    [(process, helper)] = started
    assert process.returncode == -9
    assert gone_soon(helper)


def test_end_trees_sigterms_the_targets_and_their_groups_then_sigkills_survivors(
    tmp_path: Path, leader_args: list[str]
) -> None:
    process, helper = start(leader_args, "leader,helper", "run")
    end_trees([Child(process)], [led_by(process)], 0.5)
    assert process.wait(5) == -9
    assert terms(tmp_path, "helper") == 1
    assert gone_soon(helper)


def test_our_own_group_and_init_are_never_signalled() -> None:
    groups = [Group(pgid, lambda: True) for pgid in (os.getpgrp(), 0, 1)]
    end_trees([], groups, 0.05, always_kill_groups=True)  # we are still here


# -- only our own processes -------------------------------------------------------------------


def test_a_child_that_exited_is_not_reaped_so_its_group_stays_ours(leader_args: list[str]) -> None:
    """``Child.ended`` asks with WNOWAIT: the leader stays a zombie, holding its pid (the group's
    id), until the caller reaps it; only then does the group need another proof."""
    process, helper = start(leader_args, "", "exit")
    try:
        child = Child(process)
        assert wait_for(child.ended, 10.0)
        assert process.returncode is None  # not reaped: still ours, as a zombie
        assert Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        assert child.holds_group() and led_by(process).proof()
        os.waitpid(process.pid, 0)  # reaped behind Popen's back: its pid may be anyone's now
        assert not child.holds_group() and child.ended()
        assert not led_by(process).proof()  # reaped, and no marker to prove the group by
        assert process.returncode is not None  # so Child.signal leaves the pid alone
    finally:
        os.kill(helper, 9)


def test_a_reaped_leaders_group_is_left_alone_unless_a_process_in_it_carries_the_marker(
    tmp_path: Path, leader_args: list[str]
) -> None:
    """After the leader was reaped its pid, the group's id, could be another process's: the
    group gets a signal only while a process in it carries the tree's marker."""
    unmarked = {key: value for key, value in os.environ.items() if key != RUN_ENV}
    process = start_session([*leader_args, "", "exit"], env=unmarked, cwd=None)
    helper = helper_of(process)
    process.wait()
    end_group(process, grace=5, marker=new_tree())  # a marker nobody in the group carries
    assert not gone_soon(helper, 0.3)  # not signalled: nothing proves the group ours
    os.kill(helper, 9)

    marker = new_tree()
    process = start_session([*leader_args, "", "exit"], env={**unmarked, RUN_ENV: marker}, cwd=None)
    helper = helper_of(process)
    process.wait()
    end_group(process, marker=marker)
    assert gone_soon(helper)  # the helper carries the marker: the group is proven ours


def test_a_pid_whose_start_time_changed_is_never_signalled(
    tmp_path: Path, leader_args: list[str]
) -> None:
    """A reused pid, simulated: the start time on record is not the one the pid has now (the
    process itself is the same one). Nothing is sent; with the right start time it is."""
    process, helper = start(leader_args, "leader,helper", "run")
    try:
        started = start_time(helper)
        assert started is not None
        assert not signal_process(helper, started + 1, 15)
        assert not signal_process(helper, None, 15)  # never known: never signalled
        Verified(helper, started + 1).signal(15)
        time.sleep(0.2)
        assert terms(tmp_path, "helper") == 0
        assert Verified(helper, started + 1).ended()  # not that process: ended, as far as we go
        assert signal_process(helper, started, 15)
        assert wait_for(lambda: terms(tmp_path, "helper") == 1, 10.0)
        assert not Verified(helper, started).ended()
    finally:
        end_group(process)
        process.wait()
    assert gone_soon(helper)


def test_carriers_are_the_processes_of_one_tree_or_one_run_and_never_another(
    tmp_path: Path,
) -> None:
    """A tree's marker matches its value exactly (``run:1`` is not ``run:10``), a run's matches
    every tree of that run and no other run; this process is never among them, and a process
    exec'd with a cleared environment (``env -i``) carries nothing (where the marker cannot
    hold)."""
    from pytest_startup_guard.runtime.run_marker import carriers, new_run_id

    run, other_run = new_run_id(), new_run_id()
    values = {
        "tree 1": f"{run}:1",
        "tree 10": f"{run}:10",
        "other run": f"{other_run}:1",
        "a run whose id begins with ours": f"{run}0:1",
    }
    sleepers = {
        name: subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            env={**os.environ, RUN_ENV: value},
        )
        for name, value in values.items()
    }
    # A child of a marked shell, exec'd with nothing in its environment.
    cleared = subprocess.Popen(
        ["sh", "-c", "exec env -i sleep 60"], env={**os.environ, RUN_ENV: f"{run}:1"}
    )
    try:
        assert wait_for(lambda: all(start_time(p.pid) for p in [*sleepers.values(), cleared]), 10.0)
        pids = {name: process.pid for name, process in sleepers.items()}
        assert wait_for(lambda: cleared.pid not in {c.pid for c in carriers(f"{run}:1")}, 10.0)
        assert {c.pid for c in carriers(f"{run}:1")} == {pids["tree 1"]}
        whole = {c.pid for c in carriers(run, whole_run=True)}
        assert whole == {pids["tree 1"], pids["tree 10"]}
        assert {c.pid for c in carriers(f"{run}:10", whole_run=True)} == whole
        assert os.getpid() not in whole
    finally:
        for process in [*sleepers.values(), cleared]:
            process.kill()
            process.wait()
