"""Only our own processes: the controller takes a child's pid and uid from the socket, not from
what the child says, and signals a pid only while it is the process that said hello."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_for

from pytest_startup_guard.runtime.controller import RuntimeController
from pytest_startup_guard.runtime.process_identity import start_time
from pytest_startup_guard.runtime.protocol import FrameReader, decode, encode

LINUX = sys.platform.startswith("linux")


@pytest.fixture
def controller() -> Iterator[RuntimeController]:
    with RuntimeController() as running:
        yield running


def say_hello(path: Path, claimed_pid: int) -> dict[str, object]:
    """Connect from this process, say hello as ``claimed_pid``, and return the reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(encode({"op": "hello", "pid": claimed_pid, "ppid": 1, "t": time.monotonic()}))
        reader = FrameReader()
        while True:
            frames = reader.feed(sock.recv(65536))
            if frames:
                return decode(frames[0])


@pytest.mark.skipif(not LINUX, reason="SO_PEERCRED is Linux's; elsewhere the claimed pid is kept")
def test_a_hello_that_names_another_pid_is_recorded_with_the_real_one(
    controller: RuntimeController,
) -> None:
    reply = say_hello(controller.folder / "ctl.sock", claimed_pid=1)
    assert reply.get("ok") == 1
    assert wait_for(lambda: controller.reached(os.getpid()))
    record = controller.processes[os.getpid()]
    assert record.claimed_pid == 1
    assert 1 not in controller.processes
    assert record.started == start_time(os.getpid()) is not None


@pytest.mark.skipif(
    not LINUX or os.geteuid() != 0, reason="connecting as another user needs root and Linux"
)
def test_a_connection_of_another_user_is_refused(controller: RuntimeController) -> None:
    # The folder is private (0700): open it up, so that only the uid check stands in the way.
    controller.folder.chmod(0o755)
    (controller.folder / "ctl.sock").chmod(0o777)
    code = textwrap.dedent(
        """
        import marshal, os, socket, sys, time
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)  # nobody, from here on (the interpreter itself is not theirs to run)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(sys.argv[1])
        body = marshal.dumps({"op": "hello", "pid": os.getpid(), "t": time.monotonic()}, 4)
        try:  # the controller may have closed it before the hello is even sent
            sock.sendall(len(body).to_bytes(4, "big") + body)
            reply = sock.recv(65536)
        except (BrokenPipeError, ConnectionResetError):
            reply = b""
        print("reply:", reply or b"closed", flush=True)
        """
    )
    completed = subprocess.run(
        [sys.executable, "-S", "-c", code, str(controller.folder / "ctl.sock")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "")},
    )
    # Dropped at once: the connection is closed before any hello is read, never answered.
    assert "reply: b'closed'" in completed.stdout, completed
    assert not controller.processes
    say_hello(controller.folder / "ctl.sock", claimed_pid=os.getpid())  # ours still get in
    assert wait_for(lambda: controller.reached(os.getpid()))


def test_stacks_are_asked_only_of_the_process_that_said_hello(
    controller: RuntimeController,
) -> None:
    """A reused pid, simulated: the record's start time is moved by one tick, as if the pid now
    named a process that started later. No signal goes out; with the true start time it does."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        env={**os.environ, **controller.env},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "up\n"
        assert wait_for(lambda: controller.reached(child.pid))
        record = controller.processes[child.pid]
        assert record.started is not None and record.dump_path is not None
        true_start = record.started
        record.started = true_start + 1
        assert controller.dump_stacks(child.pid, timeout=1.0) is None
        assert Path(record.dump_path).read_text() == ""  # nothing was asked of it
        record.started = true_start
        stacks = controller.dump_stacks(child.pid)
        assert stacks is not None and "most recent call first" in stacks
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


# -- every message believed only for its sender ------------------------------------------------

FORGER = '''
"""Speaks for another process over a connection of its own: a reap, a bye, a bind and an
access of the pid it is given, then one of its own."""
import os, socket, sys, time
from pytest_startup_guard.runtime.protocol import PLAN_ENV, FrameReader, decode, decode_plan, encode

victim = int(sys.argv[1])
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(30)
sock.connect(decode_plan(os.environ[PLAN_ENV])["socket"])
reader = FrameReader()

def ask(message):
    sock.sendall(encode(message))
    while True:
        frames = reader.feed(sock.recv(65536))
        if frames:
            return decode(frames[0])

now = time.monotonic()
sock.sendall(encode({"op": "reaped", "pid": victim, "code": 0, "t": now, "by": victim, "noreply": 1}))
sock.sendall(encode({"op": "bye", "pid": victim, "code": 0, "cause": None, "t": now, "noreply": 1}))
print("bind:", ask({"op": "bind", "pid": victim, "host": "127.0.0.1", "port": 9, "t": now}))
print("access:", ask({"op": "access", "pid": victim, "ev": "open", "path": "/forged", "t": now}))
print("own:", ask({"op": "access", "pid": os.getpid(), "ev": "open", "path": "/own", "t": now}))
'''

FORGED_SUITE = f"""
import subprocess, sys, time
from pathlib import Path

FORGER = {FORGER!r}


def test_one_process_speaks_for_another(child_runtime):
    child_runtime.report_binds()
    victim = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; time.sleep(1.5); sys.exit(3)"]
    )
    deadline = time.monotonic() + 30
    while not child_runtime.reached(victim.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    forger = subprocess.run(
        [sys.executable, "-c", FORGER, str(victim.pid)],
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert "access: {{'ok': 1}}" in forger.stdout, forger
    forger_pid = next(r.pid for r in child_runtime.history if r.argv[1:2] == ["-c"] and r.pid != victim.pid)
    Path("pids.txt").write_text(f"{{forger_pid}} {{victim.pid}}")
    assert victim.wait(timeout=30) == 3
    fate = child_runtime.fate(victim.pid, timeout=10)
    # The truth, not what the forger said: it exited with 3, its own bye said so.
    assert (fate.exit_code, fate.exit_known) == (3, "bye"), fate
    assert not [a for a in child_runtime.accesses if a.path == "/forged"]
    assert not [b for b in child_runtime.binds if b.pid == victim.pid]
    assert [a.pid for a in child_runtime.accesses if a.path == "/own"] == [forger_pid]
"""


@pytest.mark.skipif(not LINUX, reason="SO_PEERCRED is Linux's")
def test_a_message_about_another_pid_is_refused_and_fails_the_test(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(test_forged=FORGED_SUITE)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1, errors=1)
    forger, victim = (guard_pytester.path / "pids.txt").read_text().split()
    result.stdout.fnmatch_lines(["*startup-guard child runtime:*"])
    for op in ("reaped", "bye", "bind", "access"):
        rule = "reap of its own descendants" if op == "reaped" else "speaks only for itself"
        result.stdout.fnmatch_lines(
            [f"*refused a '{op}' message from pid {forger} about pid {victim} (*{rule}*): dropped*"]
        )


def test_a_child_that_writes_on_its_parents_connection_is_heard_as_itself(
    controller: RuntimeController,
) -> None:
    """A raw fork that no at-fork handler saw keeps its parent's connection: the kernel's
    parent chain proves the child descends from the sender, so its own pid is kept."""
    code = textwrap.dedent(
        """
        import os, socket, sys, time
        sys.path[:0] = [p for p in sys.argv[2:]]
        from pytest_startup_guard.runtime.protocol import FrameReader, decode, encode
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(sys.argv[1])
        def ask(message):
            sock.sendall(encode(message))
            reader = FrameReader()
            while True:
                frames = reader.feed(sock.recv(65536))
                if frames:
                    return decode(frames[0])
        ask({"op": "hello", "pid": os.getpid(), "ppid": os.getppid(), "t": time.monotonic()})
        child = os.fork()
        if child == 0:
            ask({"op": "access", "pid": os.getpid(), "ev": "open", "path": "/child", "t": 0.0})
            os._exit(0)
        os.waitpid(child, 0)
        print(child, flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(controller.folder / "ctl.sock"), *sys.path],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    child = int(done.stdout.split()[-1])
    assert [access.pid for access in controller.accesses if access.path == "/child"] == [child]
    assert not controller.refused and not controller.errors
