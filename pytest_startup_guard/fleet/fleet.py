"""``Fleet``: the members of one launch, watched after it, judged, and stopped.

What ``launch`` (``launcher.py``) returns: each member's ``Server`` and process, its hits and
workers, and the assertions. It keeps watching after the launch returns: a ready member that
exits, a worker that dies, is caught at ``assert_all_ready``, a case's ``check`` or teardown
(``unreported_problems``). ``stop`` ends whole process trees: SIGTERM, then SIGKILL after a
grace period; with them every process that carries the fleet's marker in its environment
(``STARTUP_GUARD_RUN``, ``runtime/run_marker.py``): what its members started and detached. Its
assertions after ``stop`` are an error: a stopped member no longer says how it started.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pytest_startup_guard.checks import pattern
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.faults.armed import ArmedFaults
from pytest_startup_guard.faults.lock_not_exclusive import LockFaults
from pytest_startup_guard.faults.ports import PortFaults
from pytest_startup_guard.faults.process import ProcessFaults
from pytest_startup_guard.faults.protocol import ArmedFault
from pytest_startup_guard.fleet.ports import Lease
from pytest_startup_guard.fleet.reaper import GRACE_SECONDS, Reaper
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.fleet.warm.forked import ForkedProcess
from pytest_startup_guard.fleet.workers import (
    QuietWatch,
    Worker,
    WorkerAccesses,
    settle,
    workers_under,
)
from pytest_startup_guard.races.armed import Hit
from pytest_startup_guard.races.hubrace import HubRace
from pytest_startup_guard.runtime.barrier import BarrierGroup
from pytest_startup_guard.runtime.controller import RuntimeController
from pytest_startup_guard.runtime.own_time import MAX_STRETCH, OwnClock
from pytest_startup_guard.runtime.process_group import (
    ByPid,
    Child,
    Group,
    Target,
    end_late,
    end_trees,
    led_by,
    marked,
)
from pytest_startup_guard.runtime.process_identity import running as still_running
from pytest_startup_guard.runtime.process_identity import same_process
from pytest_startup_guard.runtime.process_tree import ProcessTree
from pytest_startup_guard.runtime.protocol import RUN_ENV
from pytest_startup_guard.runtime.run_marker import new_tree

# The longest a judgement waits for the controller to hear how gone processes ended.
CATCH_UP_SECONDS = 2.0
# At teardown, how long workers still starting up get to end or go quiet before the stop.
TEARDOWN_SETTLE_SECONDS = 2.0
# When a check finds a dead worker under a member still running, how long (the member's own
# time) its supervisor gets to react (end its other workers, exit), so that the report shows the
# member's own last line. A supervisor that outlives its dead workers costs a check this long.
SUPERVISOR_REACTS_SECONDS = 3.0


@dataclass
class RunningMember:
    """A started member: its ``Server``, its process, its port lease and its output file."""

    server: Server
    process: (
        subprocess.Popen[bytes] | ForkedProcess
    )  # forked from a warm template: ``warm/forked.py``
    lease: Lease | None
    output_handle: object


class Fleet:
    """The result of one ``launch``: ``servers``, assertions, and ``stop``."""

    def __init__(
        self,
        label: str,
        timeout: float,
        group: BarrierGroup,
        controller: RuntimeController,
        reaper: Reaper,
        faults: ArmedFaults,
        races: HubRace | None = None,
        *,
        workers_wanted: int | None = None,
    ) -> None:
        self.label = label
        self.timeout = timeout
        self._running: list[RunningMember] = []
        self.group = group
        self.controller = controller
        self._reaper = reaper
        self.armed_faults = faults  # every fault of its launch, armed and closed as one
        self.races = races
        self.released_t: float | None = None
        self.stopped = False
        self.workers_wanted = workers_wanted  # launch(workers=N): N up per member to be ready
        self._worker_accesses = WorkerAccesses()
        self._quiet = QuietWatch()
        self.reported: set[str] = set()  # worker problems a check or assertion already raised
        # Members a check or assertion failed for a dead worker: what follows from that failure
        # (its supervisor exiting) is not reported a second time at teardown.
        self.reported_members: set[int] = set()
        self.start_lines: list[str] = []  # how its members started (forked warm, or cold: why)
        # In every member's environment, so in all they start: stop ends what carries it.
        self.marker = new_tree(reaper)

    @property
    def marker_env(self) -> dict[str, str]:
        """What every member's environment gets last (nothing may override it)."""
        return {RUN_ENV: self.marker}

    @property
    def running(self) -> list[RunningMember]:
        """Each member's process and what it holds, in member order."""
        return list(self._running)

    @property
    def forked(self) -> bool:
        """Every member was forked from a warm template (``warm/forked.py``)."""
        return bool(self._running) and all(
            isinstance(running.process, ForkedProcess) for running in self._running
        )

    def add(self, running: RunningMember) -> None:
        """A member that was just started: from now on ``stop`` ends it too."""
        self._running.append(running)

    def hits_of(self, server: Server) -> list[Hit]:
        """Accesses of ``server`` and its descendants that met an open window of the races."""
        if self.races is None:
            return []
        pids = self.members_pids(server)
        # HubRace.hits, not each armed race's: it first reads a chaos refresher's windows.
        return [hit for hit in self.races.hits if hit.member == server.member or hit.pid in pids]

    def workers_of(self, server: Server) -> list[Worker]:
        """Every Python process that reported in under ``server`` but the member itself."""
        return workers_under(self.controller, server.member, server.pid, self._worker_accesses)

    def catch_up(self, server: Server, within: float = CATCH_UP_SECONDS) -> None:
        """Wait (at most ``within`` seconds) until the controller has heard the end of every
        process of ``server`` that is gone: a member's exit is seen at once, but the goodbyes
        and ``waitpid`` reports of it and its workers come through the controller's thread."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            with self.controller.lock:
                records = [
                    record
                    for record in self.controller.processes.values()
                    if record.member == server.member
                ]
            if all(
                record.ended_t is not None or still_running(record.pid, record.started)
                for record in records
            ):
                return
            time.sleep(0.01)

    def workers_up(self, server: Server, now: float | None = None) -> list[Worker]:
        """``server``'s workers that are up: running, started up, quiet since
        (``workers.QuietWatch``)."""
        return self._quiet.up(self.workers_of(server), time.monotonic() if now is None else now)

    def raced_names(self) -> tuple[str, ...]:
        """The names of the files the races work on (what a cause line should name)."""
        if self.races is None:
            return ()
        with self.controller.lock:
            armed = list(self.races.armed)
        names = []
        for race in armed:
            for attribute in ("filename", "path"):
                value = getattr(race.target, attribute, None)
                if value:
                    names.append(Path(str(value)).name)
        return tuple(dict.fromkeys(names))

    def follow_up(self, timeout: float | None = None) -> None:
        """Catch up with what happened since ``launch`` returned: a ready member that exited
        since, and workers still starting up, waited for until they end or go quiet (at most
        ``timeout`` seconds, the fleet's time-out by default)."""
        if self.stopped:
            return
        names = self.raced_names()
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        for running in self._running:
            server = running.server
            server.raced_names = names
            self.catch_up(server)
            settle(partial(self.workers_of, server), deadline, self._quiet)
            code = running.process.poll()
            if code is not None and server.ready and server.died_after_ready is None:
                with self.controller.lock:
                    record = self.controller.processes.get(server.pid)
                ended = record.ended_t if record is not None else None
                exited_t = ended if ended is not None else time.monotonic()
                server.returncode, server.seconds_to_exit = code, exited_t - server.released_t
                server.died_after_ready = max(
                    0.0, server.seconds_to_exit - (server.seconds_to_ready or 0.0)
                )

    def worker_problems(self) -> list[str]:
        """Every failure the members' states do not show: dead workers, members that died
        after they were ready (``follow_up`` first). What it returns counts as reported."""
        return [
            problem
            for problems in self.worker_problems_by_server().values()
            for problem in problems
        ]

    def worker_problems_by_server(self) -> dict[int, list[str]]:
        """``worker_problems`` by member index (members with none left out). A member with a
        dead worker that is still running first gets its supervisor's time to react
        (``let_supervisors_react``). What it returns counts as reported, and so do the members
        it names."""
        self.follow_up()
        if self.let_supervisors_react():
            self.follow_up(0.0)  # a member that exited since: its exit is recorded
        problems = {server.index: server.worker_problems() for server in self.servers}
        for index, lines in problems.items():
            self.reported.update(lines)
            if lines:
                self.reported_members.add(index)
        return {index: lines for index, lines in problems.items() if lines}

    def let_supervisors_react(self, within: float = SUPERVISOR_REACTS_SECONDS) -> bool:
        """Wait until each ready member with a dead worker has exited, or has had ``within``
        seconds of its own time since (at most ``MAX_STRETCH`` times that in wall time): a
        supervisor ends its other workers and exits after a worker died, and a check that
        reports the death should show that too. Whether any member was waited for."""
        if self.stopped:
            return False
        reacting = [
            running
            for running in self._running
            if running.server.ready
            and running.process.poll() is None
            and running.server.failed_workers()
        ]
        if not reacting:
            return False
        start = time.monotonic()
        clocks = [OwnClock(running.process.pid, start) for running in reacting]
        while time.monotonic() - start < within * MAX_STRETCH:
            waiting = [
                clock
                for running, clock in zip(reacting, clocks, strict=True)
                if running.process.poll() is None
            ]
            if not waiting or all(clock.own() >= within for clock in waiting):
                break
            time.sleep(0.02)
        return True

    def unreported_problems(self, within: float = TEARDOWN_SETTLE_SECONDS) -> list[str]:
        """At teardown, before the stop: what failed in a member that was ready and that no
        check or assertion reported (a worker that died after readiness, while the test went
        on). Members that never were ready are their test's to judge, and so is what follows
        from a failure a check already reported in a member (its supervisor's exit after its
        workers died)."""
        if self.stopped:
            return []
        self.follow_up(within)
        return [
            problem
            for server in self.servers
            if server.ready and server.index not in self.reported_members
            for problem in server.worker_problems()
            if problem not in self.reported
        ]

    @property
    def faults(self) -> list[ArmedFault]:
        """Every fault of the launch, whatever its family, in the order given: each answers
        ``met``, ``effects``, ``describe()``, ``miss()``, ``lines()``, ``cause(index)`` (a port
        fault also ``.port``, ``.hits``; an ``fs_error`` ``.failed``; ...)."""
        return self.armed_faults.listed()

    @property
    def port_faults(self) -> PortFaults:
        return self.armed_faults.ports

    @property
    def process_faults(self) -> ProcessFaults:
        """Faults on what its processes do (fs_error, network_fs, ...)."""
        return self.armed_faults.processes

    @property
    def lock_faults(self) -> LockFaults:
        """Locks that do not exclude."""
        return self.armed_faults.locks

    @property
    def servers(self) -> list[Server]:
        return [running.server for running in self._running]

    def __iter__(self) -> Iterator[Server]:
        return iter(self.servers)

    def __len__(self) -> int:
        return len(self._running)

    def pids(self) -> list[int]:
        """The members' pids (not their descendants'), in member order."""
        return [running.process.pid for running in self._running]

    def summary(self) -> str:
        ready = sum(1 for server in self.servers if server.ready)
        head = f"fleet of {len(self)} x `{self.label}`: {ready} of {len(self)} ready within {self.timeout:g} s"
        faults = [*self.start_lines, *self.armed_faults.lines()]
        return "\n".join([head, *faults, *(server.report() for server in self.servers)])

    def assert_all_ready(self) -> None:
        """Every member came up (and its probe accepted it), and none of its workers failed,
        before or after; the message lists every member."""
        __tracebackhide__ = True
        self._require_not_stopped("assert_all_ready()")
        problems = self.worker_problems()
        if not all(server.ready for server in self.servers):
            raise AssertionError(f"not every server became ready\n{self.summary()}")
        if problems:
            raise AssertionError(
                "\n".join(
                    [
                        "not every server started up:",
                        *(f"  - {p}" for p in problems),
                        "",
                        self.summary(),
                    ]
                )
            )

    def assert_all_failed(self, match: str | None = None) -> None:
        """No member came up; each exited non-zero (with ``match`` found in its output)."""
        __tracebackhide__ = True
        self._require_not_stopped("assert_all_failed()")
        if match is not None:
            pattern("match", match, "fleet.assert_all_failed()")
        problems = []
        for server in self.servers:
            if server.ready:
                problems.append(f"server {server.index} became ready")
            elif server.state != "exited":
                problems.append(f"server {server.index} did not exit ({server.state})")
            elif server.returncode == 0:
                problems.append(f"server {server.index} exited with code 0")
            elif match is not None and not server.output_search(match):
                problems.append(f"server {server.index}'s output does not match {match!r}")
        if problems:
            raise AssertionError(
                "not every server failed as expected: "
                + "; ".join(problems)
                + "\n"
                + self.summary()
            )

    def _require_not_stopped(self, call: str) -> None:
        """An assertion after ``stop``: a clear error, never a pass (a stopped member that had
        not come up yet reads "stopped", not "hung" or "exited")."""
        __tracebackhide__ = True
        if self.stopped:
            raise StartupGuardError(
                f"fleet.{call} was called after fleet.stop(): the fleet of {len(self)} x"
                f" `{self.label}` is stopped, and its members no longer tell how they started;"
                f" call fleet.{call} before fleet.stop() (teardown stops every fleet by itself)"
            )

    def members_pids(self, server: Server) -> set[int]:
        """The member and every Python descendant that reported in under its label."""
        with self.controller.lock:
            pids = {
                record.pid for record in self.controller.history if record.member == server.member
            }
        return pids | {server.pid}

    def tree_pids(self, server: Server) -> set[int]:
        """``members_pids`` and every descendant of the member, Python or not, as they are now."""
        import psutil

        pids = self.members_pids(server)
        try:
            pids |= {child.pid for child in psutil.Process(server.pid).children(recursive=True)}
        except psutil.Error:
            pass
        return pids

    def stop(self, grace: float = GRACE_SECONDS) -> None:
        """SIGTERM every process tree of the fleet, and every process that carries its marker;
        SIGKILL what is left after ``grace``, and what started meanwhile."""
        if self.stopped:
            return
        stopped_t = time.monotonic()
        for server in self.servers:
            server.stopped_t = stopped_t
        self.stopped = True
        self.armed_faults.close()  # ports taken by port_taken faults are given back
        with _alarm_blocked():
            members = [running.process for running in self._running]
            descendants = self._descendants()
            known = {member.pid for member in members} | {d.process.pid for d in descendants}
            targets: list[Target] = [
                *map(_member_target, members),
                *descendants,
                # What left the trees and the groups (a daemon: setsid and a double fork).
                *marked(self.marker, spare=known),
            ]
            # start_new_session: each member leads a process group of its own, ours while the
            # member is not reaped (Child.ended does not reap), else while a process in it
            # carries the marker.
            end_trees(targets, [_member_group(member, self.marker) for member in members], grace)
            end_late(self.marker)  # started while the others ended, and still marked
            for running in self._running:
                self._settle(running)  # reaps each member

    def _descendants(self) -> list[ByPid]:
        """Every process of the members' trees but the members, as they are now: each Python
        process that reported in under a member, while its pid is still the process that said
        hello, and every descendant of those and of the members not reaped yet."""
        import psutil

        with self.controller.lock:
            records = [
                (record.pid, record.started, record.member) for record in self.controller.history
            ]
        members = {running.server.member for running in self._running}
        roots = [(pid, started) for pid, started, member in records if member in members]
        others: dict[int, psutil.Process] = {}
        tree = ProcessTree()  # the process table read once, for every root
        for pid, started in roots:
            try:
                process = psutil.Process(pid)
                # Read after psutil pinned its start time: a pid reused before that fails here.
                if not same_process(pid, started):
                    continue
                others[pid] = process
                for child in tree.descendants(process):
                    others[child.pid] = child
            except psutil.Error:
                pass
        for running in self._running:
            if running.process.returncode is not None:
                continue  # reaped: its pid may be another process's by now
            try:
                # Not reaped: its pid is still its own (a zombie's children went to init).
                for child in tree.descendants(psutil.Process(running.process.pid)):
                    others[child.pid] = child
            except psutil.Error:
                pass
        for running in self._running:
            others.pop(running.process.pid, None)  # our own children: Popen keeps their exit codes
        return [ByPid(process) for process in others.values()]

    def _settle(self, running: RunningMember) -> None:
        """Record how a stopped member ended and give back what it held."""
        server = running.server
        if server.returncode is None:
            server.returncode = running.process.poll()
        if server.state == "starting":
            server.state = "stopped"
        self._reaper.remove(running.process.pid)
        if running.lease is not None:
            running.lease.release()
        close = getattr(running.output_handle, "close", None)
        if close is not None:
            close()


def _member_target(process: subprocess.Popen[bytes] | ForkedProcess) -> Target:
    """A member as ``end_trees`` ends it: our child, or a fork of a warm template."""
    return process.target() if isinstance(process, ForkedProcess) else Child(process)


def _member_group(process: subprocess.Popen[bytes] | ForkedProcess, marker: str) -> Group:
    """The process group a member leads, proven ours before each signal."""
    return process.group(marker) if isinstance(process, ForkedProcess) else led_by(process, marker)


@contextmanager
def _alarm_blocked() -> Iterator[None]:
    """pytest-timeout's signal method must not cut a teardown short: hold SIGALRM until done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
