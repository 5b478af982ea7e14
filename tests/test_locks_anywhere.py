"""Locks anywhere: a lock held by a live process on any path, and locks that do not exclude.

As users run them (``-p startup_guard``), with real processes: the holder of ``lock_held`` is
a process of its own that keeps a second process out with each kind of lock and ends with the
test; a start-up that waits forever on a lock held for good is named as hanging on it; and
``lock_not_exclusive`` lets two processes hold ``flock`` and ``lockf`` at once, or fails the
launch when no two did.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
WRITER = ROOT / "examples" / "servers" / "locked_writer_server.py"

COMMON = f"""
import os, subprocess, sys, time
from pathlib import Path
import psutil
import pytest
from pytest_startup_guard import (
    LockHeld, LockHeldForGood, lock_not_exclusive, on_access, placed, ready,
)

WRITER = [sys.executable, {str(WRITER)!r}, "--port", "{{port}}"]

# Tries the lock once without waiting: prints "took" or "busy".
TRY = '''
import fcntl, os, sys
kind, path = sys.argv[1], sys.argv[2]
if kind == "soft":
    from filelock import SoftFileLock, Timeout
    try:
        SoftFileLock(path).acquire(timeout=0.2)
        print("took")
    except Timeout:
        print("busy")
else:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT)
    take = fcntl.flock if kind == "flock" else fcntl.lockf
    try:
        take(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("took")
    except OSError:
        print("busy")
'''

# Takes the lock (blocking), says who else is inside while it holds it, then stays up.
WORKER = '''
import fcntl, os, sys, time
path, how, log = sys.argv[1], sys.argv[2], sys.argv[3]
descriptor = os.open(path, os.O_RDWR | os.O_CREAT)
take = fcntl.flock if how == "flock" else fcntl.lockf
take(descriptor, fcntl.LOCK_EX)
with open(log, "a") as out:
    out.write(f"in {{os.getpid()}}\\\\n")
time.sleep(0.3)
words = open(log).read().split()
entries, me = list(zip(words[::2], words[1::2])), str(os.getpid())
came = entries.index(("in", me))
others = set()  # who was inside at some moment while this one was
for position, (word, pid) in enumerate(entries):
    if pid != me and word == "in":
        others.add(pid)
    elif pid != me and word == "out" and position < came:
        others.discard(pid)  # it had left before this one came in
with open(log, "a") as out:
    out.write(f"out {{os.getpid()}}\\\\n")
take(descriptor, fcntl.LOCK_UN)
print(f"inside with {{len(others)}} other(s)", flush=True)
time.sleep(60)
'''

def try_lock(kind, path):
    done = subprocess.run([sys.executable, "-c", TRY, kind, str(path)], capture_output=True,
                          text=True, timeout=60)
    return done.stdout.strip() or done.stderr

def holders(path):
    '''The plugin's holder processes of the lock at ``path``.'''
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = process.info["cmdline"] or []
        if "pytest_startup_guard.races.lock_holder" in line and str(path) in line:
            found.append(process.pid)
    return found
"""


@pytest.fixture
def locks_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


def test_a_held_lock_keeps_another_process_out_with_each_kind_until_released(
    locks_pytester: pytest.Pytester,
) -> None:
    locks_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.parametrize("kind", ["flock", "lockf", "soft"])
        def test_held_for_good_then_released(shared_dir, hub_race, kind):
            lock = shared_dir / "build" / "build.lock"
            armed = hub_race.arm_path(LockHeld(kind=kind), lock, trigger=placed())
            [holder] = holders(lock)
            assert holder != os.getpid()  # a live process of its own, not the test's
            assert try_lock(kind, lock) == "busy"
            assert armed.hits and all(hit.path == str(lock) for hit in armed.hits)
            if kind == "soft":  # filelock's owner record names the live holder
                assert lock.read_text().split()[0] == str(holder)
            armed.disarm()
            assert holders(lock) == []
            assert try_lock(kind, lock) == "took"

        def test_held_for_the_hold_of_a_window(shared_dir, hub_race):
            lock = shared_dir / "download.lock"
            armed = hub_race.arm_path("lock_held", lock, trigger=on_access(hold=0.3))
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-c",
                 "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX)",
                 str(lock)], timeout=60)
            assert done.returncode == 0
            assert time.monotonic() - started >= 0.25  # it waited for the window's holder
            # The holder let go as the window closed; the close is noted once the holder exited.
            deadline = time.monotonic() + 10
            while armed.is_open and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(armed.windows) == 1 and armed.windows[0].closed_t is not None
            assert armed.hits and holders(lock) == []
        """
    )
    result = locks_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=4)


def test_the_holder_ends_with_the_test_after_a_failure_and_when_pytest_dies(
    locks_pytester: pytest.Pytester,
) -> None:
    locks_pytester.makepyfile(
        """
        from common import *

        def test_fails_while_held(shared_dir, hub_race):
            lock = shared_dir / "x.lock"
            hub_race.arm_path("lock_held_for_good", lock, allow_miss=True)
            Path("holder-1").write_text(" ".join(map(str, holders(lock))))
            assert False, "the test fails while the lock is held"

        def test_pytest_dies_while_held(shared_dir, hub_race):
            if not os.environ.get("DIE"):
                pytest.skip("run by the outer test only")
            lock = shared_dir / "y.lock"
            hub_race.arm_path(LockHeldForGood(kind="lockf"), lock, allow_miss=True)
            Path("holder-2").write_text(" ".join(map(str, holders(lock))))
            time.sleep(120)
        """
    )
    result = locks_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1, skipped=1)
    [holder] = map(int, (locks_pytester.path / "holder-1").read_text().split())
    assert not psutil.pid_exists(holder)

    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "startup_guard", "-k", "dies", "-q"],
        cwd=locks_pytester.path,
        env={**os.environ, "DIE": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid_file = locks_pytester.path / "holder-2"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    [holder] = map(int, pid_file.read_text().split())
    assert psutil.pid_exists(holder)
    inner.send_signal(signal.SIGKILL)  # no teardown: the holder must end by itself or be reaped
    inner.wait()
    deadline = time.monotonic() + 30
    while _running(holder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(holder), f"the holder pid {holder} outlived the pytest that started it"


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_start_up_that_waits_forever_on_a_lock_held_for_good_is_named_hanging_on_it(
    locks_pytester: pytest.Pytester,
) -> None:
    locks_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.startup_races(stale=["lock_held_for_good"])
        @pytest.mark.parametrize("on_held", ["wait", "timeout"])
        def test_download_lock(startup_case, shared_dir, server_fleet, on_held):
            startup_case.apply(shared_dir / "download.lock")
            fleet = server_fleet.launch(
                WRITER + ["--folder", str(shared_dir), "--on-held", on_held,
                          "--lock-timeout", "1"],
                count=2, ready=ready.http("/health"), timeout=3,
            )
            startup_case.check(fleet)
        """
    )
    result = locks_pytester.runpytest_subprocess("-p", "startup_guard", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_download_lock?stale-lock_held_for_good-wait? FAILED*",
            "*test_download_lock?stale-lock_held_for_good-timeout? PASSED*",
            "*server 0 hung on the held lock */download.lock*give up on a lock nobody releases*",
        ]
    )


def test_locks_that_do_not_exclude_let_two_processes_in_at_once_and_a_miss_fails(
    locks_pytester: pytest.Pytester,
) -> None:
    locks_pytester.makepyfile(
        """
        from common import *

        def launch(server_fleet, shared_dir, how, locked, faulted):
            log = shared_dir / f"{how}.log"
            return server_fleet.launch(
                [sys.executable, "-c", WORKER, str(shared_dir / locked), how, str(log)],
                count=2, ready=ready.log("inside with"), timeout=15,
                faults=[lock_not_exclusive(faulted)],
            )

        @pytest.mark.parametrize("how", ["flock", "lockf"])
        def test_two_holders_at_once(server_fleet, shared_dir, how):
            # a folder: every lock file under it
            fleet = launch(server_fleet, shared_dir, how, "a.lock", shared_dir)
            fleet.assert_all_ready()
            for server in fleet.servers:
                assert "inside with 1 other(s)" in server.output, server.output

        def test_a_lock_elsewhere_still_excludes_and_the_fault_is_never_met(server_fleet, shared_dir):
            with pytest.raises(AssertionError) as raised:
                launch(server_fleet, shared_dir, "flock", "b.lock", shared_dir / "a.lock")
            message = str(raised.value)
            assert "lock fault lock_not_exclusive(" in message and "never met" in message
            assert "no process of the fleet called flock or lockf on" in message
            assert "allow_miss=True" in message
            [fleet] = server_fleet.fleets
            for server in fleet.servers:  # the real lock kept them apart
                assert "inside with 0 other(s)" in server.output, server.output
        """
    )
    result = locks_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=3)


def test_a_member_that_dies_of_a_lock_that_does_not_exclude_is_named_with_the_fault(
    locks_pytester: pytest.Pytester,
) -> None:
    locks_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.parametrize("policy", ["naive", "safe"])
        def test_writer(server_fleet, shared_dir, policy):
            fleet = server_fleet.launch(
                WRITER + ["--folder", str(shared_dir), "--policy", policy, "--lock", "lockf"],
                count=2, ready=ready.http("/health"), timeout=15,
                faults=[lock_not_exclusive(shared_dir / "download.lock")],
            )
            fleet.assert_all_ready()
        """
    )
    result = locks_pytester.runpytest_subprocess("-p", "startup_guard", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_writer?naive? FAILED*",
            "*test_writer?safe? PASSED*",
            "*lock_not_exclusive: it held the lock */download.lock at the same time as member ?"
            " (pid *) (lockf locked nothing)*",
        ]
    )
