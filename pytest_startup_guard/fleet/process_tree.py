"""Ending whole process trees: SIGTERM, a grace period, then SIGKILL for whatever is left.

``Fleet.stop`` and the reaper both end fleet members' trees, and must do it the same way, so
``end_trees`` owns the order: every process and every member's process group gets SIGTERM,
and what still runs after the grace period gets SIGKILL. What the two hold differs. The
fleet's members are its own children, which ``Popen`` must reap or their exit codes are lost
(psutil would reap them first); the reaper, a separate process, knows only pids. So a process
is a ``Target`` (it can be signalled and asked whether it ended), in one of two adapters:
``Child`` around a ``Popen`` and ``ByPid`` around a ``psutil.Process``; and how the grace
period is waited out is the caller's ``wait``.

Standard library only at import (psutil is imported by the calls that need it), so that the
reaper, a small process, can load it when it has trees to end.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    import subprocess

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

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
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
    own_group = os.getpgrp()
    # Never our own group (that would end us too), nor 0 or 1 (ours again, and init's).
    signalled = [group for group in dict.fromkeys(groups) if group > 1 and group != own_group]
    _send(targets, signalled, signal.SIGTERM)
    survivors = wait(targets, grace)
    if not survivors and not always_kill_groups:
        return
    _send(survivors, signalled, signal.SIGKILL)
    wait(survivors, grace)


def _send(targets: Iterable[Target], groups: Iterable[int], number: int) -> None:
    for target in targets:
        target.signal(number)
    for group in groups:
        try:
            os.killpg(group, number)
        except OSError:
            pass
