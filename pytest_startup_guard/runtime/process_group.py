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
  SIGTERM every process and group, SIGKILL what still runs after ``grace``;
- ``end_marked``: end every process whose environment carries a tree's (or a run's) marker
  (``run_marker``): what left the tree and the group (a daemon: a new session, a double fork).

Only our own processes get a signal. A process ``end_trees`` ends is a ``Target`` (it can be
signalled and asked whether it ended), in one of three adapters, each sure of its process:
``Child`` around a ``Popen`` (a child of this process, not reaped until the caller says so: a
zombie keeps its pid), ``Verified`` (a pid and its start time, checked again at each signal)
and ``ByPid`` around a ``psutil.Process`` (psutil compares the start time it read first). A
process group is a ``Group`` with the proof, asked again before each signal, that it is still
the one meant: its leader is our child and not reaped yet (a group's id is its leader's pid,
which no other process can take while the leader is a zombie), or a running process in it
carries the tree's marker. A group of this process (or 0 or 1) is never signalled. How the
grace period is waited out is the caller's ``wait``.

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

from pytest_startup_guard.runtime.process_identity import running, signal_process
from pytest_startup_guard.runtime.protocol import RUN_ENV
from pytest_startup_guard.runtime.run_marker import carriers, group_carries, new_tree, one_sweep

if TYPE_CHECKING:
    import psutil

POLL_SECONDS = 0.02  # how often wait_until_ended looks again
LATE_ROUNDS = 3  # end_late: rounds of SIGKILL for processes started while the others ended
KILL_WAIT = 2.0  # end_late: seconds a SIGKILLed process gets to be gone (it takes milliseconds)


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
    """A process this one started, which ``Popen`` reaps (its exit code stays in
    ``returncode``). Nothing here reaps it: while it is not reaped, its pid (and the id of the
    group it leads) stays its own, so a signal to either reaches it and nothing else."""

    def __init__(self, process: subprocess.Popen[Any]) -> None:
        self.process = process

    def signal(self, number: int) -> None:
        # Not Popen.send_signal: it polls first, and a poll that reaps gives the pid up.
        if self.process.returncode is None:
            try:
                os.kill(self.process.pid, number)  # a zombie ignores it
            except OSError:
                pass

    def ended(self) -> bool:
        """Whether it exited; asked with ``WNOWAIT``, which leaves it to be reaped."""
        return self._state() != "running"

    def holds_group(self) -> bool:
        """Whether the group it leads is still its own: it is not reaped (a zombie still holds
        its pid, which is the group's id, so no other process can have made a group of it)."""
        return self._state() != "reaped"

    def _state(self) -> str:
        """``running``, ``exited`` (a zombie, ours to reap) or ``reaped``."""
        if self.process.returncode is not None:
            return "reaped"
        try:
            state = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            # Reaped behind Popen's back (os.wait elsewhere): its pid may be anyone's now.
            # Popen's poll sees the same and sets returncode, so signal() leaves it alone too.
            self.process.poll()
            return "reaped"
        return "running" if state is None else "exited"


class Verified:
    """A process known by its pid and start time: signalled only while the pid still has that
    start time (``process_identity.signal_process``), so a reused pid is left alone."""

    def __init__(self, pid: int, started: int) -> None:
        self.pid = pid
        self.started = started

    def signal(self, number: int) -> None:
        signal_process(self.pid, self.started, number)

    def ended(self) -> bool:
        """Gone, another process by now, or a zombie: it runs no more, whoever is to reap it."""
        return not running(self.pid, self.started)


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


class Group:
    """A process group, signalled only while ``proof()`` says it is still the one meant."""

    def __init__(self, pgid: int, proof: Callable[[], bool]) -> None:
        self.pgid = pgid
        self.proof = proof

    def signal(self, number: int) -> bool:
        """Send ``number`` to the group; whether it was sent. Never to our own group, 0 or 1."""
        if self.pgid <= 1 or self.pgid == os.getpgrp() or not self.proof():
            return False
        try:
            os.killpg(self.pgid, number)
        except OSError:
            return False
        return True


def led_by(process: subprocess.Popen[Any], marker: str | None = None) -> Group:
    """The group ``process`` leads (started with ``start_new_session``): its own while the
    leader is not reaped; after that, only while a running process in it carries ``marker``."""
    leader = Child(process)

    def proof() -> bool:
        return leader.holds_group() or (marker is not None and group_carries(process.pid, marker))

    return Group(process.pid, proof)


def end_trees(
    targets: Sequence[TargetT],
    groups: Iterable[Group],
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


def end_group(
    process: subprocess.Popen[Any], grace: float = 0.0, marker: str | None = None
) -> None:
    """End the group ``process`` leads (it was started with ``start_new_session``).

    With ``grace`` and the leader still running, SIGTERM the group (not the leader on its own)
    and wait up to ``grace`` seconds for the leader to end. Then, whether or not the leader has
    ended, SIGKILL the group (what the leader started and left behind) and the leader, should it
    still run outside it. Nothing is waited for after the SIGKILL: the caller reaps the leader.
    A leader already reaped proves nothing: its group is signalled only while a process in it
    carries the tree's ``marker``.
    """
    leader = Child(process)
    group = [led_by(process, marker)]
    if grace > 0 and not leader.ended() and _send((), group, signal.SIGTERM):
        wait_until_ended([leader], grace)
    _send([leader], group, signal.SIGKILL)


def marked(marker: str, *, whole_run: bool = False, spare: Iterable[int] = ()) -> list[Verified]:
    """Every running process of ours that carries the tree ``marker`` (``whole_run``: any tree
    of its run), but the pids in ``spare`` (ended otherwise, such as our own children)."""
    spared = set(spare)
    return [
        Verified(carrier.pid, carrier.started)
        for carrier in carriers(marker, whole_run=whole_run)
        if carrier.pid not in spared
    ]


def end_marked(marker: str, grace: float, *, whole_run: bool = False) -> None:
    """End every process of ours that carries ``marker``: with ``grace``, SIGTERM and SIGKILL
    after ``grace``; without, SIGKILL at once. Then ``end_late``."""
    if grace > 0:
        end_trees(marked(marker, whole_run=whole_run), [], grace)
    end_late(marker, whole_run=whole_run)


def end_late(marker: str, *, whole_run: bool = False) -> None:
    """SIGKILL what still carries ``marker`` (after its trees ended: what started meanwhile, as
    a supervisor restarts what ends), for up to ``LATE_ROUNDS`` rounds, until none is left;
    each round waits up to ``KILL_WAIT`` seconds for them to end."""
    for _ in range(LATE_ROUNDS):
        late = marked(marker, whole_run=whole_run)
        if not late:
            return
        _send(late, [], signal.SIGKILL)
        wait_until_ended(late, KILL_WAIT)


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
    grace)`` and reap the leader. Nothing the leader started in its group outlives the block.

    ``env`` without a tree marker (``RUN_ENV``) gets a new one: the group is then proven ours
    by it after the leader was reaped. A caller that starts many sessions of one tree puts its
    marker in ``env`` and ends what left the groups with ``end_marked`` once they are done."""
    marker = env.get(RUN_ENV) or new_tree()
    process = start_session(argv, env={**env, RUN_ENV: marker}, cwd=cwd, stderr=stderr)
    try:
        yield process
    finally:
        end_group(process, grace, marker)
        process.wait()


def _others(groups: Iterable[Group]) -> list[Group]:
    """The groups, once each, without ours (that would end us too), 0 or 1 (ours again, init's)."""
    own_group = os.getpgrp()
    unique = {group.pgid: group for group in groups}
    return [group for pgid, group in unique.items() if pgid > 1 and pgid != own_group]


def _send(targets: Iterable[Target], groups: Iterable[Group], number: int) -> bool:
    """Signal each target, then each group; whether some group received it."""
    for target in targets:
        target.signal(number)
    received = False
    with one_sweep():  # each group's proof by its marker: one read of the environments
        for group in groups:
            received = group.signal(number) or received
    return received


__all__ = [
    "POLL_SECONDS",
    "ByPid",
    "Child",
    "Group",
    "Target",
    "TargetT",
    "Verified",
    "Wait",
    "end_group",
    "end_late",
    "end_marked",
    "end_trees",
    "led_by",
    "marked",
    "session",
    "start_session",
    "wait_until_ended",
]
