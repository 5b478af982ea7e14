"""Joining a plan: the check that it is live, the hello, the stack dump and the start barrier.

A process with a plan first checks that it is live: its folder is a private folder of this user
(not a symlink) and its controller answers the hello (``plan_refusal``, ``join``). A stale plan
(its test is over, or the folder is not ours) changes nothing of the process. Under a live plan
it takes on what the hello's reply asks for, registers a stack dump of all its threads on
``DUMP_SIGNAL`` into its own file, and, if it is a fleet member, waits until the whole fleet is
released at once (``_wait_at_barrier``).

Built-in modules only (``faulthandler``, ``os``, ``select``, ``sys``, ``time``): children import
this at interpreter start.
"""

from __future__ import annotations

import faulthandler
import os
import select
import sys
import time

from pytest_startup_guard.runtime.child import locks, ports
from pytest_startup_guard.runtime.child.audit import client_sink, set_footprint, set_watched
from pytest_startup_guard.runtime.child.client import Client
from pytest_startup_guard.runtime.child.state import DUMP_SIGNAL, state
from pytest_startup_guard.runtime.protocol import (
    ANCESTRY_ENV,
    PLAN_ENV,
    PROTOCOL_VERSION,
    decode_plan,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

DEFAULT_TIMEOUT = 30.0  # seconds: a plan's reply and barrier time-outs where it names none
MAX_PLAN_SECONDS = 86400.0  # a day: a longer time-out is no plan of ours (and no socket takes inf)
# File types of st_mode (the stat module's values, which POSIX fixes), without importing stat.
_S_IFMT, _S_IFDIR, _S_IFSOCK = 0o170000, 0o040000, 0o140000


def plan_refusal(plan: dict[str, Any]) -> str | None:
    """Why this process must not follow ``plan``, or None when it may.

    Everything it says is checked before it is used: its protocol version, its time-outs
    (finite seconds, at most a day), its socket and dumps paths. A controller makes its plan's
    folder private (``mkdtemp``: mode 0700) and puts its socket there. A folder that is gone, a symlink, another user's or open to other users is not a
    live plan of ours: at best the leftover of a test that is over, at worst a plan someone
    else planted to be told what this process opens. ``os.lstat`` only: no symlink is
    followed, no audit event raised."""
    version = plan.get("v", PROTOCOL_VERSION)
    if type(version) is not int or version != PROTOCOL_VERSION:
        return f"its protocol version {version!r} is not this runtime's ({PROTOCOL_VERSION})"
    for key in ("reply_timeout", "barrier_timeout"):  # a socket's time-out, a barrier's wait
        seconds = plan.get(key, DEFAULT_TIMEOUT)
        if type(seconds) not in (int, float) or not 0 < seconds <= MAX_PLAN_SECONDS:
            return f"its {key} {seconds!r} is not a number of seconds in (0, {MAX_PLAN_SECONDS:g}]"
    socket_path = plan.get("socket")
    if type(socket_path) is not str or not socket_path.startswith("/"):
        return f"its socket {socket_path!r} is not an absolute path"
    folder = socket_path.rpartition("/")[0] or "/"
    for path, kind, file_type in ((folder, "folder", _S_IFDIR), (socket_path, "socket", _S_IFSOCK)):
        try:
            info = os.lstat(path)
        except OSError as error:
            return f"its {kind} {path} is gone ({error.strerror})"
        if info.st_mode & _S_IFMT != file_type:
            return f"its {kind} {path} is not a {kind} (a symlink, or another kind of file)"
        if info.st_uid != os.geteuid():
            return (
                f"its {kind} {path} belongs to uid {info.st_uid}, not to this user ({os.geteuid()})"
            )
        if kind == "folder" and info.st_mode & 0o077:
            mode = oct(info.st_mode & 0o777)
            return f"its folder {folder} is open to other users (mode {mode}; a plan's is 0o700)"
    dumps = plan.get("dumps")
    if dumps is not None and (type(dumps) is not str or dumps.rpartition("/")[0] != folder):
        return f"its dumps folder {dumps!r} is not in its folder {folder}"
    return None


def join(
    plan: dict[str, Any], member: str | None, ancestry: tuple[int, ...], forked: bool
) -> str | None:
    """Say hello under ``plan`` and, once the controller answered, take it on: the state, the
    stack dump, the ancestry in the environment, the start barrier. Returns None then, or why
    the plan is not live, having changed nothing of this process."""
    why_not = plan_refusal(plan)
    if why_not is not None:
        return why_not
    try:
        client = Client(plan)
    except OSError as error:
        return f"nothing answers at {plan['socket']} ({type(error).__name__})"
    dump = _open_dump(plan)  # in the plan's own private folder: told in the hello
    reply = client.request(
        {
            "op": "hello",
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "member": member,
            "ancestry": list(ancestry),
            "argv": list(getattr(sys, "orig_argv", sys.argv)),
            "dump": dump[1] if dump is not None else None,
            "forked": forked,
            "t": time.monotonic(),
        },
        timeout=float(plan.get("barrier_timeout", 30.0)) + 5.0,
    )
    if reply is None:
        client.close()
        if dump is not None:
            _discard_dump(*dump)
        return f"the controller at {plan['socket']} did not answer"
    state.plan, state.client, state.member = plan, client, member
    _set_ancestry(ancestry)
    if dump is not None:
        _arm_dump(*dump)
    set_watched(tuple(reply.get("watch", ())))
    state.binds = bool(reply.get("binds"))
    ports.watch(bool(reply.get("probes")), client)
    locks.watch(reply.get("locks"), client)  # lock_not_exclusive: locks that do not lock
    set_footprint(bool(reply.get("footprint")))
    state.sink = client_sink
    fifo = reply.get("barrier")
    if fifo:
        released_at = _wait_at_barrier(fifo, float(plan.get("barrier_timeout", 30.0)))
        client.request({"op": "released", "t": released_at, "noreply": True})
    return None


def _open_dump(plan: dict[str, Any]) -> tuple[IO[str], str] | None:
    """This process's stack dump file in the plan's folder, or None (no dumps, or no file)."""
    dumps = plan.get("dumps")
    if not dumps:
        return None
    path = os.path.join(dumps, f"{os.getpid()}.txt")
    try:
        return open(path, "w"), path  # faulthandler keeps writing to it: never closed here
    except OSError:
        return None


def _arm_dump(dump_file: IO[str], path: str) -> None:
    """Dump every thread's stack into ``dump_file`` on ``DUMP_SIGNAL`` (``dump_stacks``)."""
    try:
        faulthandler.register(DUMP_SIGNAL, file=dump_file, all_threads=True, chain=False)
    except (OSError, ValueError, RuntimeError):
        _discard_dump(dump_file, path)
        return
    old, state.dump_file, state.dump_path = state.dump_file, dump_file, path
    if old is not None:  # the parent's, in a forked child
        try:
            old.close()
        except OSError:
            pass


def _discard_dump(dump_file: IO[str], path: str) -> None:
    try:
        dump_file.close()
        os.remove(path)
    except OSError:
        pass


def _wait_at_barrier(fifo: str, timeout: float) -> float:
    """Block until the controller writes our byte into the group's FIFO (one write releases the
    whole fleet), or until ``timeout``; return when we left."""
    try:
        descriptor = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return time.monotonic()
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if os.read(descriptor, 1) in (b"x", b""):  # our byte, or the controller is gone
                    break
            except BlockingIOError:
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            select.select([descriptor], [], [], remaining)
        released_at = time.monotonic()
        # Members woken together often outnumber the cores, and the first ones to run would
        # keep them for a whole time slice (~12 ms spread for 8 on 2 cores). Stepping aside for
        # a millisecond lets every member leave the barrier before any runs on (~0.3 ms).
        time.sleep(0.001)
        return released_at
    finally:
        os.close(descriptor)


def _set_ancestry(ancestors: tuple[int, ...]) -> None:
    state.ancestry = ancestors
    os.environ[ANCESTRY_ENV] = ",".join(str(pid) for pid in (*ancestors, os.getpid()))


def load_plan(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    plan = decode_plan(raw)
    if plan is None:
        sys.stderr.write(f"startup-guard: ignoring malformed {PLAN_ENV}\n")
    return plan
