"""``server_fleet``: N real server processes started at the same moment, watched one by one.

``launch`` creates every process behind the child runtime's start barrier, releases them
together, and then watches each member on its own thread: ready (its probe says so), rejected
(it answered, wrongly), exited (fail-fast: its own wait ends at once, its siblings go on), or
hung (still not ready at the time-out: its Python stacks are collected). Output goes to a file
per member, never to a pipe that could fill up. ``stop`` and teardown end whole process trees:
SIGTERM, then SIGKILL after a grace period.

``faults=`` puts port faults on a launch (``port_faults``): they are armed before any member
starts, a member they involve is probed only on a port its own tree listens on, and a fault
that no member met fails the launch.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Literal

from pytest_startup_guard.cache.hubcache import FakeHubCache
from pytest_startup_guard.checks import seconds, whole_number
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.fleet import ready as ready_module
from pytest_startup_guard.fleet.exit_wait import ExitWait
from pytest_startup_guard.fleet.port_faults import ArmedPortFault, PortFault, PortFaults
from pytest_startup_guard.fleet.ports import Lease, PortLeases
from pytest_startup_guard.fleet.reaper import GRACE_SECONDS, Reaper
from pytest_startup_guard.fleet.workers import (
    QuietWatch,
    Worker,
    WorkerAccesses,
    exception_lines,
    leftover_kind,
    listening_pids,
    settle,
    workers_under,
)
from pytest_startup_guard.races.armed import Hit
from pytest_startup_guard.races.hubrace import HubRace
from pytest_startup_guard.runtime.controller import BarrierGroup, RuntimeController
from pytest_startup_guard.runtime.own_time import MAX_STRETCH, OwnClock
from pytest_startup_guard.runtime.process_group import ByPid, Child, Target, end_trees

_PLACEHOLDER = re.compile(r"\{(\w*)\}")
PLACEHOLDERS = ("port", "index", "count")
TAIL_LINES = 15
POLL_SECONDS = 0.01  # how often a member's exit and probe are looked at
WAIT_SAMPLE_EVERY = 5  # polls between two reads of a member's CPU wait (it is gone once reaped)


def fill_placeholders(argv: Sequence[str], values: Mapping[str, object]) -> list[str]:
    """Replace ``{port}``, ``{index}``, ``{count}``; any other ``{name}`` is a clear error."""
    filled = []
    for position, arg in enumerate(argv):
        if not isinstance(arg, str):
            raise TypeError(
                f"invalid argv[{position}] {arg!r} for server_fleet.launch(): expected a str"
            )

        def replace(match: re.Match[str], position: int = position, arg: str = arg) -> str:
            name = match.group(1)
            if name not in values:
                known = ", ".join("{" + key + "}" for key in PLACEHOLDERS)
                raise ValueError(
                    f"unknown placeholder {match.group(0)} in argv[{position}] {arg!r} of"
                    f" server_fleet.launch(); known: {known} (write {{{{ and }}}} for braces)"
                )
            return str(values[name])

        filled.append(_PLACEHOLDER.sub(replace, arg).replace("{{", "{").replace("}}", "}"))
    return filled


def resolve_command(command: str, env: Mapping[str, str], cwd: Path | None) -> str:
    """The program that will run, or a clear error before anything starts."""
    if os.sep in command:
        path = Path(command) if os.path.isabs(command) or cwd is None else cwd / command
        if not path.is_file():
            raise StartupGuardError(
                f"command {command!r} (argv[0] of server_fleet.launch) does not exist: no such file"
            )
        if not os.access(path, os.X_OK):
            raise StartupGuardError(
                f"command {command!r} (argv[0] of server_fleet.launch) is not executable"
            )
        return str(path)
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise StartupGuardError(
            f"command {command!r} (argv[0] of server_fleet.launch) does not exist:"
            f" not found on PATH={env.get('PATH', '')}"
        )
    return found


def runs_python(program: str) -> bool:
    """Whether the program is a Python interpreter or a script run by one (it will say hello)."""
    if os.path.basename(program).startswith("python") or os.path.realpath(
        program
    ) == os.path.realpath(sys.executable):
        return True
    try:
        with open(program, "rb") as handle:
            first = handle.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


# What became of a member: still starting, ready (its probe accepted it), rejected (it
# answered, wrongly), exited before it was ready, hung (not ready at the time-out, having had
# its time), undecided (the machine never gave it its time), or stopped before any of these.
ServerState = Literal["starting", "ready", "rejected", "exited", "hung", "undecided", "stopped"]
# The states whose status is followed by the exit code, where there is one (an exit names it).
EXIT_CODE_NOTED: tuple[ServerState, ...] = ("ready", "rejected", "hung", "undecided", "stopped")


def _no_hits(server: Server) -> list[Hit]:
    return []


def _no_workers(server: Server) -> list[Worker]:
    return []


# How many exception lines of a member's output a failure message quotes.
CAUSE_LINES = 3
# The longest a judgement waits for the controller to hear how gone processes ended.
CATCH_UP_SECONDS = 2.0
# At teardown, how long workers still starting up get to end or go quiet before the stop.
TEARDOWN_SETTLE_SECONDS = 2.0


def _alive(pid: int) -> bool:
    """Whether ``pid`` is still a running process (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


@dataclass
class Server:
    """One fleet member and what became of it (times in seconds since the fleet's release)."""

    index: int
    pid: int
    port: int | None
    command: list[str]
    output_path: Path
    state: ServerState = "starting"
    ready: bool = False
    seconds_to_ready: float | None = None
    returncode: int | None = None
    seconds_to_exit: float | None = None
    reason: str = ""
    seconds_waiting: float = 0.0  # waiting for a CPU, from the release to its state's decision
    seconds_to_timeout: float | None = None  # when it was found hung or undecided (wall)
    stacks: dict[int, str] = field(default_factory=dict)
    member: str = ""
    told_port: int | None = None  # the port it was told ({port}); ``port`` is where it serves
    # In a port fault: whether its own process tree was seen listening on ``port`` when it was
    # found ready (None: not in a port fault, or not ready).
    port_owned: bool | None = None
    # Its fleet's ``hits_of``: the races' hits are read when asked for, never copied.
    hits_of: Callable[[Server], list[Hit]] = field(default=_no_hits, repr=False, compare=False)
    # Its fleet's ``workers_of``: what the child runtime knows of its workers, read when asked.
    workers_of: Callable[[Server], list[Worker]] = field(
        default=_no_workers, repr=False, compare=False
    )
    released_t: float = 0.0  # monotonic: the fleet's release, the zero of its times
    stopped_t: float | None = None  # monotonic: when its stop began (what ends after is not judged)
    # A member that was ready and then exited before it was stopped: seconds after readiness.
    died_after_ready: float | None = None
    # The names of the raced files, which a failure message's cause lines are picked by.
    raced_names: tuple[str, ...] = ()

    @property
    def output(self) -> str:
        try:
            return self.output_path.read_text(errors="replace")
        except OSError:
            return ""

    @property
    def own_seconds_to_exit(self) -> float | None:
        """Seconds from the release to its exit in which it could run (waits for a CPU left out)."""
        if self.seconds_to_exit is None:
            return None
        return max(0.0, self.seconds_to_exit - self.seconds_waiting)

    @property
    def hits(self) -> list[Hit]:
        """Accesses of this member and its descendants that met an open race window."""
        return self.hits_of(self)

    @property
    def workers(self) -> list[Worker]:
        """Every Python process under this member but the member itself, oldest first."""
        return self.workers_of(self)

    def failed_workers(self, workers: list[Worker] | None = None) -> list[Worker]:
        """Workers that did start-up work and ended with a failure before the member was
        stopped (what its stop ends is not theirs to answer for)."""
        workers = self.workers if workers is None else workers
        return [
            worker
            for worker in workers
            if worker.failed
            and (self.stopped_t is None or (worker.ended_t or 0.0) < self.stopped_t)
        ]

    @property
    def started_up(self) -> bool:
        """Ready, and nothing of it failed since: no worker died, the member did not exit."""
        return self.ready and not self.failed_workers() and self.died_after_ready is None

    def seconds_since_release(self, t: float) -> float:
        return t - self.released_t

    def worker_problems(self) -> list[str]:
        """One line per failure beyond the member's state: a worker that died (even where the
        member answered its probe), a ready member that exited; each with its cause."""
        problems = []
        if self.died_after_ready is not None:
            problems.append(
                f"server {self.index} (pid {self.pid}) was ready, then exited with code"
                f" {self.returncode} {self.died_after_ready:.2f} s later" + self._cause_suffix(None)
            )
        for worker in self.failed_workers():
            assert worker.ended_t is not None
            when = f"after {self.seconds_since_release(worker.ended_t):.2f} s"
            if self.seconds_to_ready is not None:
                after_ready = self.seconds_since_release(worker.ended_t) - self.seconds_to_ready
                if after_ready >= 0:
                    when += f", {after_ready:.2f} s after the server was ready"
                elif self.ready:
                    when += ", before the server was ready (it answered its probe anyway)"
            problems.append(
                f"{worker.label()} of server {self.index} {worker.end_words()} {when}"
                + self._cause_suffix(worker)
            )
        return problems

    def _cause_suffix(self, worker: Worker | None) -> str:
        """': OSError: ...' from the process itself, else the output's first exception line."""
        if worker is not None and worker.cause:
            return f": {worker.cause}"
        lines = exception_lines(self.output, self.raced_names)
        return f": {lines[0]} (from the output)" if lines else ""

    def root_causes(self) -> list[str]:
        """The root-cause lines of a failed start-up: each failed worker's own exception, then
        the output's exception lines (those naming a raced file first), each once."""
        causes: dict[str, None] = {}
        for worker in self.failed_workers():
            if worker.cause:
                causes.setdefault(f"{worker.label()}: {worker.cause}", None)
        for line in exception_lines(self.output, self.raced_names)[:CAUSE_LINES]:
            causes.setdefault(line, None)
        return list(causes)

    def tail(self, lines: int = TAIL_LINES) -> str:
        return "\n".join(self.output.rstrip("\n").splitlines()[-lines:])

    def describe(self) -> str:
        head = f"server {self.index}  pid {self.pid}" + (f"  port {self.port}" if self.port else "")
        if self.told_port is not None and self.port != self.told_port:
            head += f" (told {self.told_port})"
        return f"{head}  {self.status()}"

    def status(self) -> str:
        """What became of it, in a few words: 'EXITED with code 1 after 0.31 s, before ...'."""
        if self.state == "ready":
            status = f"ready after {self.seconds_to_ready:.2f} s"
        elif self.state == "exited":
            status = f"EXITED with code {self.returncode} after {self.seconds_to_exit:.2f} s, before it was ready"
        elif self.state == "rejected":
            status = f"came up WRONG: {self.reason}"
        elif self.state == "hung":
            status = f"HUNG: not ready and still running at the time-out ({self.reason})"
        elif self.state == "undecided":
            status = f"UNDECIDED: the machine was too slow to decide ({self.reason})"
        else:
            status = self.state
        if self.returncode is not None and self.state in EXIT_CODE_NOTED:
            status += f"; exit code {self.returncode}"
        if self.state == "ready" and self.died_after_ready is not None:
            status += f", then EXITED {self.died_after_ready:.2f} s later"
        failed = self.failed_workers()
        if failed:
            status += f"; {len(failed)} of {len(self.workers)} workers FAILED"
        return status

    def report(self) -> str:
        lines = [self.describe()]
        if self.reason and self.state == "exited":
            lines.append(f"    {self.reason}")
        workers = self.workers
        lines.extend(f"    {line}" for line in self._worker_lines(workers))
        if not self.started_up:
            lines.extend(f"    root cause: {line}" for line in self.root_causes())
        hits = self.hits
        if hits:
            counts: dict[str, int] = {}
            for hit in hits:
                what = f"{hit.op} {'/'.join(Path(hit.path).parts[-2:])}"
                counts[what] = counts.get(what, 0) + 1
            lines.append(
                "    races hit: " + ", ".join(f"{what} x{n}" for what, n in counts.items())
            )
        else:
            lines.append("    races hit: none")
        tail = self.tail()
        lines.append("    output (last lines):" if tail else "    output: (nothing)")
        lines.extend(f"    | {line}" for line in tail.splitlines())
        for pid, stack in self.stacks.items():
            lines.append(f"    python stacks of pid {pid}:")
            lines.extend(f"    | {line}" for line in stack.rstrip().splitlines())
        return "\n".join(lines)

    def _worker_lines(self, workers: list[Worker]) -> list[str]:
        """'workers: 4 (3 running, 1 failed)' and a line per worker that ended."""
        if not workers:
            return []
        failed = {worker.pid for worker in self.failed_workers(workers)}
        running = sum(1 for worker in workers if not worker.ended)
        head = f"workers: {len(workers)} ({running} running"
        head += f", {len(failed)} FAILED)" if failed else ")"
        lines = [head]
        for worker in workers:
            if not worker.ended:
                continue
            assert worker.ended_t is not None
            words = f"  {worker.label()} {worker.end_words()} after {self.seconds_since_release(worker.ended_t):.2f} s"
            if worker.pid in failed:
                words += " (FAILED" + (f": {worker.cause})" if worker.cause else ")")
            elif not worker.startup_work:
                words += " (did no start-up work: not judged)"
            elif self.stopped_t is not None and (worker.ended_t or 0.0) >= self.stopped_t:
                words += " (when the fleet was stopped)"
            lines.append(words)
        return lines


def _needs_port(argv: Sequence[str], ready: ready_module.Probe) -> bool:
    """Whether members get a port: argv has ``{port}``, or the probe connects to one."""
    return any("{port}" in arg for arg in argv) or isinstance(
        ready, (ready_module.Http, ready_module.Tcp)
    )


def _describe_probe(ready: ready_module.Probe) -> str:
    describe = getattr(ready, "describe", None)
    return str(describe()) if callable(describe) else repr(ready)


@dataclass
class RunningMember:
    """A started member: its ``Server``, its process, its port lease and its output file."""

    server: Server
    process: subprocess.Popen[bytes]
    lease: Lease | None
    output_handle: object


@dataclass(frozen=True)
class _Plan:
    """What each member of one launch runs, decided before any of them starts."""

    argv: list[str]  # with its placeholders: each member fills in its own
    count: int
    env: dict[str, str]
    cwd: Path | None
    python: bool  # a Python program, which reports in at the start barrier
    member_env: tuple[Mapping[str, str], ...] = ()  # per member, over ``env`` (an explore's caches)

    @property
    def label(self) -> str:
        return " ".join(shlex.quote(arg) for arg in self.argv)

    def command(self, index: int, port: int | None) -> list[str]:
        """Member ``index``'s argv, its placeholders filled in."""
        values = {"port": port if port is not None else "", "index": index, "count": self.count}
        return fill_placeholders(self.argv, values)


class Fleet:
    """The result of one ``launch``: ``servers``, assertions, and ``stop``."""

    def __init__(
        self,
        label: str,
        timeout: float,
        group: BarrierGroup,
        controller: RuntimeController,
        reaper: Reaper,
        port_faults: PortFaults,
        races: HubRace | None = None,
    ) -> None:
        self.label = label
        self.timeout = timeout
        self._running: list[RunningMember] = []
        self.group = group
        self.controller = controller
        self._reaper = reaper
        self.port_faults = port_faults
        self.races = races
        self.released_t: float | None = None
        self.stopped = False
        self.workers_wanted: int | None = None  # launch(workers=N): N up per member to be ready
        self._worker_accesses = WorkerAccesses()
        self._quiet = QuietWatch()
        self.reported: set[str] = set()  # worker problems a check or assertion already raised

    @property
    def running(self) -> list[RunningMember]:
        """Each member's process and what it holds, in member order."""
        return list(self._running)

    def add(self, running: RunningMember) -> None:
        """A member that was just started: from now on ``stop`` ends it too."""
        self._running.append(running)

    def hits_of(self, server: Server) -> list[Hit]:
        """Accesses of ``server`` and its descendants that met an open window of the races."""
        if self.races is None:
            return []
        pids = self.members_pids(server)
        with self.controller.lock:
            armed = list(self.races.armed)
        return [
            hit
            for race in armed
            for hit in race.hits
            if hit.member == server.member or hit.pid in pids
        ]

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
            if all(record.ended_t is not None or _alive(record.pid) for record in records):
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
        """``worker_problems`` by member index (members with none left out)."""
        self.follow_up()
        problems = {server.index: server.worker_problems() for server in self.servers}
        for lines in problems.values():
            self.reported.update(lines)
        return {index: lines for index, lines in problems.items() if lines}

    def unreported_problems(self, within: float = TEARDOWN_SETTLE_SECONDS) -> list[str]:
        """At teardown, before the stop: what failed in a member that was ready and that no
        check or assertion reported (a worker that died after readiness, while the test went
        on). Members that never were ready are their test's to judge."""
        if self.stopped:
            return []
        self.follow_up(within)
        return [
            problem
            for server in self.servers
            if server.ready
            for problem in server.worker_problems()
            if problem not in self.reported
        ]

    @property
    def faults(self) -> list[ArmedPortFault]:
        """The launch's port faults, in the order given: ``.port``, ``.hits``, ``.met``."""
        return list(self.port_faults.armed)

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
        faults = self.port_faults.lines()
        return "\n".join([head, *faults, *(server.report() for server in self.servers)])

    def assert_all_ready(self) -> None:
        """Every member came up (and its probe accepted it), and none of its workers failed,
        before or after; the message lists every member."""
        __tracebackhide__ = True
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
        problems = []
        for server in self.servers:
            if server.ready:
                problems.append(f"server {server.index} became ready")
            elif server.state != "exited":
                problems.append(f"server {server.index} did not exit ({server.state})")
            elif server.returncode == 0:
                problems.append(f"server {server.index} exited with code 0")
            elif match is not None and not re.search(match, server.output):
                problems.append(f"server {server.index}'s output does not match {match!r}")
        if problems:
            raise AssertionError(
                "not every server failed as expected: "
                + "; ".join(problems)
                + "\n"
                + self.summary()
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
        """SIGTERM every process tree of the fleet, SIGKILL what is left after ``grace``."""
        if self.stopped:
            return
        stopped_t = time.monotonic()
        for server in self.servers:
            server.stopped_t = stopped_t
        self.stopped = True
        self.port_faults.close()  # ports taken by port_taken faults are given back
        with _alarm_blocked():
            members = [running.process for running in self._running]
            targets: list[Target] = [*map(Child, members), *self._descendants()]
            # start_new_session: each member leads a process group of its own
            end_trees(targets, [member.pid for member in members], grace)
            for running in self._running:
                self._settle(running)

    def _descendants(self) -> list[ByPid]:
        """Every process of the members' trees but the members, as they are now."""
        import psutil

        others: dict[int, psutil.Process] = {}
        for running in self._running:
            for pid in self.members_pids(running.server):
                try:
                    process = psutil.Process(pid)
                    others[pid] = process
                    for child in process.children(recursive=True):
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


class _FleetMembers:
    """A fleet's members as its port faults see them (``port_faults.Members``)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def _server(self, index: int) -> Server | None:
        for server in self.fleet.servers:
            if server.index == index:
                return server
        return None

    def label(self, index: int) -> str | None:
        server = self._server(index)
        return server.member if server is not None else None

    def pid(self, index: int) -> int | None:
        server = self._server(index)
        return server.pid if server is not None else None

    def tree(self, index: int) -> set[int]:
        server = self._server(index)
        return self.fleet.tree_pids(server) if server is not None else set()

    def settled(self, index: int) -> bool:
        server = self._server(index)
        return server is not None and server.state != "starting"

    def status(self, index: int) -> str:
        server = self._server(index)
        return server.status() if server is not None else "never started"


class FleetLauncher:
    """Launches fleets (``launch``) and stops them all (``stop_all``); ``ServerFleet``, the
    ``server_fleet`` fixture, launches through one and adds exploring (``fleet/server_fleet.py``)."""

    def __init__(
        self,
        controller: RuntimeController,
        folder: Path,
        leases: PortLeases,
        reaper: Reaper,
        *,
        default_timeout: float,
        default_cache: FakeHubCache | None = None,
        races: HubRace | None = None,
        barrier_timeout: float = 20.0,
    ) -> None:
        self.controller = controller
        self.folder = folder
        self.leases = leases
        self.reaper = reaper
        self.default_timeout = default_timeout
        self.default_cache = default_cache
        self.races = races
        self.barrier_timeout = barrier_timeout
        self.fleets: list[Fleet] = []

    def launch(
        self,
        argv: Sequence[str],
        *,
        count: int = 1,
        ready: ready_module.Probe,
        env: Mapping[str, str] | None = None,
        cache: FakeHubCache | None = None,
        timeout: float | None = None,
        cwd: str | os.PathLike[str] | None = None,
        ports: Sequence[int] | None = None,
        faults: Sequence[PortFault] | PortFault | None = None,
        member_env: Sequence[Mapping[str, str]] = (),
        workers: int | None = None,
    ) -> Fleet:
        """Start ``count`` processes of ``argv`` at once; return when each is ready, has
        exited, or has passed the readiness time-out. Ready ones run until ``stop``/teardown.

        ``faults``: port faults (``port_taken``, ``same_port``); one that no member met raises
        ``AssertionError`` here, unless it was made with ``allow_miss=True``. ``member_env``:
        one mapping per member, over ``env`` (an exploration's private caches). ``workers=N``:
        a member is ready only once its probe says so and N of its workers are up
        (``workers.py``)."""
        __tracebackhide__ = True
        argv, timeout = self._checked_arguments(argv, count, ready, timeout, ports)
        if workers is not None:
            whole_number("workers", workers, "server_fleet.launch()", minimum=1)
        port_faults = PortFaults(
            faults,
            count=count,
            needs_port=_needs_port(argv, ready),
            ready_label=_describe_probe(ready),
        )
        workdir = Path(cwd) if cwd is not None else None
        base_env = self._environment(self._watched_cache(cache), env)
        program = resolve_command(argv[0], base_env, workdir)
        plan = _Plan(argv, count, base_env, workdir, runs_python(program), tuple(member_env))
        leases = self._lease_ports(argv, count, ready, ports)
        told = port_faults.told_ports(
            [lease.port if lease is not None else None for lease in leases]
        )
        fleet, folder = self._new_fleet(plan.label, count, timeout, port_faults)
        fleet.workers_wanted = workers
        try:
            port_faults.arm(self.controller, told, _FleetMembers(fleet), python=plan.python)
        except BaseException:
            port_faults.close()
            for lease in leases:
                if lease is not None:
                    lease.release()
            raise
        self._start_members(fleet, plan, folder, leases, told)
        if plan.python:  # only a Python member reports in at the barrier
            self._await_arrivals(fleet)
        fleet.released_t = fleet.group.release()
        raced_names = fleet.raced_names()
        for server in fleet.servers:
            server.released_t, server.raced_names = fleet.released_t, raced_names
        port_faults.released(fleet.released_t)
        self._watch(fleet, ready, timeout)
        port_faults.settle()
        misses = port_faults.misses()
        if misses:
            raise AssertionError("\n".join([*misses, fleet.summary()]))
        return fleet

    def _checked_arguments(
        self,
        argv: Sequence[str],
        count: int,
        ready: ready_module.Probe,
        timeout: float | None,
        ports: Sequence[int] | None,
    ) -> tuple[list[str], float]:
        """``argv`` as a list and the time-out in seconds, or a clear error before anything
        starts."""
        argv = list(argv) if not isinstance(argv, str) else shlex.split(argv)
        if not argv:
            raise ValueError("server_fleet.launch() needs a command: argv is empty")
        whole_number("count", count, "server_fleet.launch()", minimum=1)
        if not hasattr(ready, "check"):
            raise TypeError(
                f"invalid ready={ready!r} for server_fleet.launch(): expected ready.http(), ready.tcp(),"
                " ready.log(), ready.file() or ready.call()"
            )
        timeout = (
            self.default_timeout
            if timeout is None
            else seconds("timeout", timeout, "server_fleet.launch()", positive=True)
        )
        if ports is not None and len(ports) != count:
            raise ValueError(f"ports={list(ports)!r} names {len(ports)} ports for count={count}")
        fill_placeholders(argv, {"port": 0, "index": 0, "count": count})  # bad placeholders: now
        return argv, timeout

    def _watched_cache(self, cache: FakeHubCache | None) -> FakeHubCache | None:
        """The launch's cache (the fixture's unless given), its accesses reported from now on."""
        cache = cache if cache is not None else self.default_cache
        if cache is not None:
            self.controller.watch(cache.root)
        return cache

    def _environment(
        self, cache: FakeHubCache | None, env: Mapping[str, str] | None
    ) -> dict[str, str]:
        """Every member's environment: ours, then the cache's, the child runtime's, the test's."""
        base_env = dict(os.environ)
        if cache is not None:
            base_env.update(cache.env)
        base_env.update(self.controller.env)
        base_env.update(env or {})
        return base_env

    def _lease_ports(
        self,
        argv: Sequence[str],
        count: int,
        ready: ready_module.Probe,
        ports: Sequence[int] | None,
    ) -> list[Lease | None]:
        """One lease per member: the ports asked for, free ones where argv or the probe needs
        a port, else None."""
        if ports is not None:
            return list(self.leases.lease_exactly(list(ports)))
        if _needs_port(argv, ready):
            return list(self.leases.lease(count))
        return [None] * count

    def _new_fleet(
        self, label: str, count: int, timeout: float, port_faults: PortFaults
    ) -> tuple[Fleet, Path]:
        """A fleet with no members yet, behind a new barrier, and the folder for their output."""
        group = self.controller.barrier(count)
        folder = self.folder / f"fleet-{len(self.fleets)}"
        folder.mkdir(parents=True, exist_ok=True)
        fleet = Fleet(label, timeout, group, self.controller, self.reaper, port_faults, self.races)
        self.fleets.append(fleet)
        return fleet, folder

    def _start_members(
        self,
        fleet: Fleet,
        plan: _Plan,
        folder: Path,
        leases: list[Lease | None],
        told: list[int | None],
    ) -> None:
        """Start one member per lease, each told its port; if any start fails, stop those
        already started."""
        try:
            for index, lease in enumerate(leases):
                self._start_member(fleet, plan, folder, index, lease, told[index])
        except BaseException:
            self.reaper.add_all(fleet.pids())
            fleet.stop()
            for lease in leases[len(fleet) :]:
                if lease is not None:
                    lease.release()
            raise
        # The reaper hears of every member at once, in one write, once all are started.
        self.reaper.add_all(fleet.pids())

    def _start_member(
        self,
        fleet: Fleet,
        plan: _Plan,
        folder: Path,
        index: int,
        lease: Lease | None,
        port: int | None,
    ) -> None:
        """Start member ``index`` (held at the start barrier if it runs Python) into the fleet."""
        command = plan.command(index, port)
        output_path = folder / f"server-{index}.log"
        handle = open(output_path, "wb")  # noqa: SIM115 - closed when the fleet stops
        process = subprocess.Popen(
            command,
            env={
                **plan.env,
                **(plan.member_env[index] if plan.member_env else {}),
                **fleet.group.member_env(index),
            },
            cwd=plan.cwd,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a process group per member: trees end together
        )
        server = Server(
            index,
            process.pid,
            port,
            command,
            output_path,
            member=f"{fleet.group.name}:{index}",
            told_port=port,
            hits_of=fleet.hits_of,
            workers_of=fleet.workers_of,
        )
        # In the fleet before anything else can fail, so that its stop ends this one too.
        fleet.add(RunningMember(server, process, lease, handle))
        if plan.python:
            self.controller.expect(process.pid, f"server {index}: {plan.label}")

    def _await_arrivals(self, fleet: Fleet) -> None:
        """Wait until every member still running has reached the start barrier."""
        by_index = {running.server.index: running.process for running in fleet.running}
        fleet.group.wait_for_arrivals(
            time.monotonic() + self.barrier_timeout, lambda i: by_index[i].poll() is None
        )

    def _watch(self, fleet: Fleet, probe: ready_module.Probe, timeout: float) -> None:
        assert fleet.released_t is not None
        released = fleet.released_t
        deadline = released + timeout
        faults = fleet.port_faults
        threads = [
            threading.Thread(
                target=self._watch_member,
                args=(fleet, running, probe, released, deadline, faults),
                daemon=True,
            )
            for running in fleet.running
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for running in fleet.running:
            if running.server.state in ("hung", "undecided"):
                for pid in sorted(fleet.members_pids(running.server)):
                    stack = self.controller.dump_stacks(pid)
                    if stack:
                        running.server.stacks[pid] = stack

    def _watch_member(
        self,
        fleet: Fleet,
        running: RunningMember,
        probe: ready_module.Probe,
        released: float,
        deadline: float,
        faults: PortFaults | None = None,
    ) -> None:
        with ExitWait(running.process.pid) as exit_wait:
            self._follow_member(fleet, running, probe, released, deadline, faults, exit_wait)

    def _follow_member(
        self,
        fleet: Fleet,
        running: RunningMember,
        probe: ready_module.Probe,
        released: float,
        deadline: float,
        faults: PortFaults | None,
        exit_wait: ExitWait,
    ) -> None:
        """Watch one member until it is ready, rejected, exited, hung or undecided.

        The time-out counts the member's own time (``runtime/own_time.py``): on a busy machine
        the time it waits for a CPU is not held against it, so "hung" means what it means on a
        quiet machine. Past ``MAX_STRETCH`` times the time-out in wall time, a member that has
        still not had its time is "undecided": the machine was too slow to decide.

        A member in a port fault is probed on the port its own tree listens on (``own_port``);
        a port probe waits until it listens on one: another process's socket proves nothing.
        """
        server = running.server
        member = ready_module.Member(server.index, server.pid, server.port, server.output_path)
        faulted = faults is not None and faults.involves(server.index)
        port_probe = isinstance(probe, (ready_module.Http, ready_module.Tcp))
        port, owned = member.port, False
        clock = OwnClock(server.pid, released)
        timeout = deadline - released
        detail = ""
        polls = 0
        while True:
            if polls % WAIT_SAMPLE_EVERY == 0:
                server.seconds_waiting = clock.waited()  # read while the process is there
            polls += 1
            code = running.process.poll()
            now = time.monotonic()
            if code is not None:
                server.state, server.returncode, server.seconds_to_exit = (
                    "exited",
                    code,
                    now - released,
                )
                server.reason = self._exit_reason(fleet, server, code, faults)
                return
            if faulted:
                assert faults is not None
                port, owned = faults.own_port(server.index)
                if port is not None and port != member.port:
                    member = replace(member, port=port)
            try:
                if faulted and port_probe and port is None:
                    verdict = ready_module.NOT_YET  # it listens on nothing of its own yet
                else:
                    verdict = probe.check(member)
            except Exception as error:  # a probe that cannot work is the test's error: say so
                server.state, server.reason = (
                    "rejected",
                    f"{probe.describe()} failed: {type(error).__name__}: {error}",
                )
                return
            now = time.monotonic()
            if verdict.ready and fleet.workers_wanted is not None:
                up = len(fleet.workers_up(server, now))
                if up < fleet.workers_wanted:
                    verdict = ready_module.Verdict(
                        False,
                        f"{up} of {fleet.workers_wanted} workers up"
                        f" (launch(workers={fleet.workers_wanted}))",
                    )
            if verdict.ready:
                if faulted:
                    server.port, server.port_owned = member.port, owned
                server.state, server.ready, server.seconds_to_ready = "ready", True, now - released
                server.seconds_waiting = clock.waited()
                return
            if verdict.rejected:
                server.state, server.reason = "rejected", verdict.detail
                return
            detail = verdict.detail or detail
            if now >= deadline and self._decided(server, clock, probe, now, timeout, detail):
                return
            # Not Popen.wait(timeout): it polls waitpid from 0.5 ms up, and 32 members doing
            # that on 2 cores slow down the very servers being watched. A member that exits
            # wakes this sleep at once (a caught race ends when its first server dies).
            exit_wait.sleep(POLL_SECONDS)

    @staticmethod
    def _decided(
        server: Server,
        clock: OwnClock,
        probe: ready_module.Probe,
        now: float,
        timeout: float,
        detail: str,
    ) -> bool:
        """Past the wall deadline: hung if it had its time, undecided if the machine never
        gave it that time within ``MAX_STRETCH`` x the time-out, else keep watching."""
        server.seconds_waiting = clock.waited()
        wall = now - clock.started
        if clock.own(now) >= timeout:
            server.state, server.seconds_to_timeout = "hung", wall
            server.reason = (
                f"{probe.describe()} not ready after {timeout:g} s"
                + (f" ({clock.describe(now)})" if server.seconds_waiting >= 0.05 else "")
                + (f": {detail}" if detail else "")
            )
            return True
        if wall >= timeout * MAX_STRETCH:
            server.state, server.seconds_to_timeout = "undecided", wall
            server.reason = (
                f"{probe.describe()} not ready, but in {wall:.1f} s ({MAX_STRETCH:g} x the"
                f" {timeout:g} s time-out) it had only {clock.own(now):.1f} s of its own time:"
                f" {server.seconds_waiting:.1f} s waiting for a CPU"
            )
            return True
        return False

    def _exit_reason(
        self, fleet: Fleet, server: Server, code: int, faults: PortFaults | None = None
    ) -> str:
        output = server.output
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"killed by {name}"
        hints = []
        if not output.strip():
            hints.append("it printed nothing")
        if "Address already in use" in output:
            cause = faults.cause(server.index) if faults is not None else None
            if cause is not None:
                hints.append(cause)
            elif server.port is not None:
                hints.append(f"port {server.port} was taken before it could bind it")
        if code == 0:
            hints.append(self._clean_exit_hint(fleet, server))
        return "; ".join(hints)

    def _clean_exit_hint(self, fleet: Fleet, server: Server) -> str:
        """Why a member that exited 0 before it was ready did so, as far as can be told.

        The daemonizing hint is given only where a process left behind still serves (listens
        on a port); a supervisor that gave up after its workers died is named for that, and
        what it left behind for what each process is."""
        fleet.catch_up(server)
        workers = server.workers
        failed = server.failed_workers(workers)
        orphans = self._orphans(server)
        serving = listening_pids(orphans)
        left = ", ".join(f"{leftover_kind(pid, workers)} pid {pid}" for pid in orphans)
        if serving:
            return (
                f"it exited 0 but left {left} running, and pid(s)"
                f" {', '.join(map(str, sorted(serving)))} still serve: the server forked into"
                " the background; run it in the foreground"
            )
        if failed:
            return (
                f"it exited 0 after {len(failed)} of its {len(workers)} workers failed:"
                f" its supervisor gave up" + (f" (left running: {left})" if left else "")
            )
        return "a server should keep running; it exited 0 instead" + (
            f" (left running: {left})" if left else ""
        )

    def _orphans(self, server: Server) -> list[int]:
        """Processes left in the member's process group after it exited (daemonized children)."""
        import psutil

        orphans = []
        for process in psutil.process_iter(["pid"]):
            try:
                if process.pid != server.pid and os.getpgid(process.pid) == server.pid:
                    orphans.append(process.pid)
            except (OSError, psutil.Error):
                pass
        return orphans

    def stop_all(self) -> None:
        for fleet in self.fleets:
            fleet.stop()
