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

from pytest_startup_guard.runtime.process_group import (
    Child,
    end_group,
    end_trees,
    session,
    start_session,
)

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
    end_trees([Child(process)], [process.pid], 0.5)
    assert process.wait(5) == -9
    assert terms(tmp_path, "helper") == 1
    assert gone_soon(helper)


def test_our_own_group_and_init_are_never_signalled() -> None:
    end_trees([], [os.getpgrp(), 0, 1], 0.05, always_kill_groups=True)  # we are still here
