"""Processes in a session of their own, and ending each with everything it started.

A process started with ``start_new_session`` leads a new process group, and what it starts stays
in that group unless it leaves on purpose: ending the group ends the whole tree. The fleet
(``Fleet.stop``, and the reaper when pytest dies without its teardown), the import-race probe
and the start-method checks all do that, and this module is the one way they do it:

- ``start_session``: run argv as the leader of a new session, stdin closed, output read as text;
- ``session``: the same in a ``with`` block that, however it ends (a time-out, an error,
  Ctrl-C), ends the group and reaps the leader;
- ``end_group``: end the group one process leads: with ``grace``, SIGTERM the group and give the
  leader ``grace`` seconds; then SIGKILL the group, and the leader itself should it have left;
- ``end_trees``: end many trees at once, their processes known as well as their groups:
  SIGTERM every process and group, SIGKILL what still runs after ``grace``.

A process ``end_trees`` ends is a ``Target`` (it can be signalled and asked whether it ended),
in one of two adapters: ``Child`` around a ``Popen`` (a child of this process, which ``Popen``
must reap or its exit code is lost; psutil would reap it first) and ``ByPid`` around a
``psutil.Process`` (known by its pid only, as the reaper knows the fleet's members). How the
grace period is waited out is the caller's ``wait``. No group is ever ours: a group of this
process (or 0 or 1) is never signalled.

The test side only: no child process imports this at interpreter start. Standard library at
import; psutil is imported by the calls that need it, so that the reaper, a small process,
loads it only when it has trees to end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import psutil

POLL_SECONDS = 0.02  # how often wait_until_ended looks again


class Target(Protocol):
    """One process to end, however its owner knows it."""

    def signal(self, number: int) -> None:
        """Send signal ``number``; nothing happens if the process has ended."""

    def ended(self) -> bool:
        """Whether the process has ended; once true, it stays true."""


TargetT = TypeVar("TargetT", bound=Target)

# wait(targets, seconds): the targets still running after at most ``seconds``.
Wait = Callable[[Sequence[TargetT], float], Sequence[TargetT]]


class Child:
    """A process this one started: ``Popen`` reaps it, so its exit code stays in ``returncode``."""

    def __init__(self, process: subprocess.Popen[Any]) -> None:
        self.process = process

    def signal(self, number: int) -> None:
        if self.process.poll() is None:
            try:
                self.process.send_signal(number)
            except OSError:
                pass

    def ended(self) -> bool:
        return self.process.poll() is not None


class ByPid:
    """A process known by its pid; psutil makes sure a reused pid is not signalled."""

    def __init__(self, process: psutil.Process) -> None:
        self.process = process

    def signal(self, number: int) -> None:
        import psutil

        try:
            self.process.send_signal(number)
        except psutil.Error:
            pass

    def ended(self) -> bool:
        """Gone, or a zombie: it runs no more, whoever is to reap it."""
        import psutil

        try:
            return not self.process.is_running() or self.process.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return True


def wait_until_ended(targets: Sequence[TargetT], seconds: float) -> list[TargetT]:
    """Look at the targets until every one has ended or ``seconds`` passed; return the rest."""
    deadline = time.monotonic() + seconds
    running = list(targets)
    while True:
        running = [target for target in running if not target.ended()]
        if not running or time.monotonic() >= deadline:
            return running
        # A plain sleep, not Popen.wait(timeout): that polls waitpid from 0.5 ms up, per child.
        time.sleep(POLL_SECONDS)


def end_trees(
    targets: Sequence[TargetT],
    groups: Iterable[int],
    grace: float,
    *,
    wait: Wait[TargetT] = wait_until_ended,
    always_kill_groups: bool = False,
) -> None:
    """SIGTERM the targets, then the process groups; SIGKILL what still runs after ``grace``.

    ``always_kill_groups`` sends the groups SIGKILL even when every target ended in time, for
    processes that left the trees but stayed in a group.
    """
    signalled = _others(groups)
    _send(targets, signalled, signal.SIGTERM)
    survivors = wait(targets, grace)
    if not survivors and not always_kill_groups:
        return
    _send(survivors, signalled, signal.SIGKILL)
    wait(survivors, grace)


def end_group(process: subprocess.Popen[Any], grace: float = 0.0) -> None:
    """End the group ``process`` leads (it was started with ``start_new_session``).

    With ``grace`` and the leader still running, SIGTERM the group (not the leader on its own)
    and wait up to ``grace`` seconds for the leader to end. Then, whether or not the leader has
    ended, SIGKILL the group (what the leader started and left behind) and the leader, should it
    still run outside it. Nothing is waited for after the SIGKILL: the caller reaps the leader.
    """
    leader = Child(process)
    group = _others([process.pid])
    if grace > 0 and not leader.ended() and _send((), group, signal.SIGTERM):
        wait_until_ended([leader], grace)
    _send([leader], group, signal.SIGKILL)


def start_session(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None,
    stderr: int = subprocess.PIPE,
) -> subprocess.Popen[str]:
    """Start ``argv`` as the leader of a new session: stdin closed, stdout a pipe, stderr a pipe
    (or ``subprocess.STDOUT``), both read as text with undecodable bytes replaced."""
    return subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        errors="replace",
        start_new_session=True,
    )


@contextmanager
def session(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None,
    stderr: int = subprocess.PIPE,
    grace: float = 0.0,
) -> Iterator[subprocess.Popen[str]]:
    """``start_session`` for the block; when it ends, however it ends, ``end_group(process,
    grace)`` and reap the leader. Nothing the leader started outlives the block."""
    process = start_session(argv, env=env, cwd=cwd, stderr=stderr)
    try:
        yield process
    finally:
        end_group(process, grace)
        process.wait()


def _others(groups: Iterable[int]) -> list[int]:
    """The groups, once each, without ours (that would end us too), 0 or 1 (ours again, init's)."""
    own_group = os.getpgrp()
    return [group for group in dict.fromkeys(groups) if group > 1 and group != own_group]


def _send(targets: Iterable[Target], groups: Iterable[int], number: int) -> bool:
    """Signal each target, then each group; whether some group received it."""
    for target in targets:
        target.signal(number)
    received = False
    for group in groups:
        try:
            os.killpg(group, number)
            received = True
        except OSError:
            pass
    return received


__all__ = [
    "POLL_SECONDS",
    "ByPid",
    "Child",
    "Target",
    "TargetT",
    "Wait",
    "end_group",
    "end_trees",
    "session",
    "start_session",
    "wait_until_ended",
]
