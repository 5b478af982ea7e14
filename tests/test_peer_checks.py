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
