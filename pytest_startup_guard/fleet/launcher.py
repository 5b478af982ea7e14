"""``FleetLauncher``: N real server processes started at the same moment, watched one by one.

``launch`` creates every process behind the child runtime's start barrier, releases them
together, and then watches each member on its own thread: ready (its probe says so, and with
``workers=N`` N of its workers are up), rejected (it answered, wrongly), exited (fail-fast: its
own wait ends at once, its siblings go on), or hung (still not ready at the time-out: its Python
stacks are collected). Output goes to a file per member, never to a pipe that could fill up.

``faults=`` puts port faults on a launch (``port_faults``): they are armed before any member
starts, a member they involve is probed only on a port its own tree listens on, and a fault
that no member met fails the launch. Lock faults (``lock_faults``: locks that do not exclude)
are told to the members at their hello, and name themselves in the reason of a member that
failed after it held such a lock at once with another.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_startup_guard.cache.hubcache import FakeHubCache
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.faults.armed import ArmedFaults, ArmingPlace, LaunchShape
from pytest_startup_guard.faults.ports import PortFaults
from pytest_startup_guard.fleet import ready as ready_module
from pytest_startup_guard.fleet.exit_wait import ExitWait
from pytest_startup_guard.fleet.fleet import Fleet, RunningMember
from pytest_startup_guard.fleet.output import printed_something
from pytest_startup_guard.fleet.ports import Lease, PortLeases
from pytest_startup_guard.fleet.reaper import Reaper
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.fleet.spec import PLACEHOLDER, PLACEHOLDERS, LaunchSpec
from pytest_startup_guard.fleet.warm.forked import ForkedProcess
from pytest_startup_guard.fleet.warm.templates import (
    WarmMode,
    WarmStart,
    WarmTemplates,
    warm_choice,
)
from pytest_startup_guard.fleet.workers import (
    leftover_kind,
    listening_pids,
)
from pytest_startup_guard.races.hubrace import HubRace
from pytest_startup_guard.races.roots import PluginRoots
from pytest_startup_guard.runtime.controller import RuntimeController
from pytest_startup_guard.runtime.native.build import interposer_library, preload_env
from pytest_startup_guard.runtime.own_time import MAX_STRETCH, OwnClock
from pytest_startup_guard.wording import printable

_OTHER_PORT = re.compile(r"\{port\d+\}")  # {port0}: the port member 0 is told
POLL_SECONDS = 0.01  # how often a member's exit and probe are looked at
WAIT_SAMPLE_EVERY = 5  # polls between two reads of a member's CPU wait (it is gone once reaped)


def fill_placeholders(argv: Sequence[str], values: Mapping[str, object]) -> list[str]:
    """Replace ``{port}``, ``{index}``, ``{count}`` and ``{port<i>}`` (the port member i is
    told); any other ``{name}`` is a clear error."""
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

        filled.append(PLACEHOLDER.sub(replace, arg).replace("{{", "{").replace("}}", "}"))
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


def _needs_port(argv: Sequence[str], ready: ready_module.Probe) -> bool:
    """Whether members get a port: argv has ``{port}``, or the probe connects to one."""
    return (
        any("{port}" in arg or _OTHER_PORT.search(arg) for arg in argv)
        or isinstance(ready, (ready_module.Http, ready_module.Tcp))
        or getattr(ready, "needs_port", False)  # ready.file("...{port}...")
    )


def _describe_probe(ready: ready_module.Probe) -> str:
    describe = getattr(ready, "describe", None)
    return str(describe()) if callable(describe) else repr(ready)


@dataclass(frozen=True)
class _Plan:
    """What each member of one launch runs, decided before any of them starts."""

    argv: list[str]  # with its placeholders: each member fills in its own
    count: int
    env: dict[str, str]
    cwd: Path | None
    python: bool  # a Python program, which reports in at the start barrier
    member_env: tuple[Mapping[str, str], ...] = ()  # per member, over ``env`` (an explore's caches)
    told: tuple[int | None, ...] = ()  # the port each member is told: ``{port<i>}`` in any argv

    @property
    def label(self) -> str:
        return " ".join(shlex.quote(arg) for arg in self.argv)

    def command(self, index: int, port: int | None) -> list[str]:
        """Member ``index``'s argv, its placeholders filled in."""
        values: dict[str, object] = {
            "port": port if port is not None else "",
            "index": index,
            "count": self.count,
        }
        for other, told in enumerate(self.told):
            values[f"port{other}"] = told if told is not None else ""
        return fill_placeholders(self.argv, values)


class _FleetMembers:
    """A fleet's members as its port faults see them (``faults.port_base.Members``)."""

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
        online_env: Mapping[str, str] | None = None,
        races: HubRace | None = None,
        barrier_timeout: float = 20.0,
        warm_templates: WarmTemplates | None = None,
        warm_default: WarmMode = "off",
    ) -> None:
        self.controller = controller
        # Members forked from warm templates (``warm/templates.py``): the session's, and the run's
        # --startup-guard-warm for launches that give no warm=.
        self.warm_templates = warm_templates
        self.warm_default = warm_default
        # The loopback hub's env (``hub_remote.env``): a cache's own env is offline, so under
        # ``hub_remote`` the members get the remote's online settings over it.
        self.online_env = dict(online_env) if online_env is not None else None
        self.folder = folder
        self.leases = leases
        self.reaper = reaper
        self.default_timeout = default_timeout
        self.default_cache = default_cache
        self.races = races
        self.barrier_timeout = barrier_timeout
        self.fleets: list[Fleet] = []

    def launch(self, spec: LaunchSpec) -> Fleet:
        """Start ``spec.count`` processes of ``spec.argv`` at once; return when each is ready,
        has exited, or has passed the readiness time-out. Ready ones run until
        ``stop``/teardown. The spec was checked where it was built (``LaunchSpec.checked``).

        ``warm=True`` / ``preload=[modules]``: fork the members from a warm template
        (``warm/templates.py``); ``warm="or_cold"``: or start them cold where that is unsafe.
        ``faults``: a fault that no member met raises ``AssertionError`` here, unless it was
        made with ``allow_miss=True``. ``member_env``: one mapping per member, over ``env`` (an
        exploration's private caches). ``workers=N``: a member is ready only once its probe
        says so and N of its workers are up (``workers.py``). ``native_accesses=True``: every
        process of the fleet also reports the file calls its native code makes
        (``runtime/native``)."""
        __tracebackhide__ = True
        argv, count, ready, timeout = list(spec.argv), spec.count, spec.ready, spec.timeout
        faults, cwd, ports, member_env = spec.faults, spec.cwd, spec.ports, spec.member_env
        env, cache, workers, native_accesses = (
            spec.env,
            spec.cache,
            spec.workers,
            spec.native_accesses,
        )
        warm, preload = spec.warm, spec.preload
        roots = self.races.roots if self.races is not None else None
        shape = LaunchShape(count, _needs_port(argv, ready), _describe_probe(ready), roots)
        armed_faults = ArmedFaults(faults, shape)  # checked here, before anything starts
        workdir = Path(cwd) if cwd is not None else None
        base_env = self._environment(self._watched_cache(cache), env)
        if native_accesses:
            base_env.update(self._native_preload(base_env))
        program = resolve_command(argv[0], base_env, workdir)
        plan = _Plan(argv, count, base_env, workdir, runs_python(program), tuple(member_env))
        leases = self._lease_ports(argv, count, ready, ports)
        told = armed_faults.told_ports(
            [lease.port if lease is not None else None for lease in leases]
        )
        plan = replace(plan, told=tuple(told))
        try:
            warm_start = self._warm_start(
                plan, program, warm, preload, timeout, native_accesses, told[0]
            )
        except BaseException:
            for lease in leases:
                if lease is not None:
                    lease.release()
            raise
        fleet, folder = self._new_fleet(plan.label, count, timeout, armed_faults, workers)
        if warm_start is not None:
            fleet.start_lines.append(warm_start.line(count))
        try:
            armed_faults.arm(
                ArmingPlace(
                    self.controller,
                    fleet.group.name,
                    told,
                    _FleetMembers(fleet),
                    plan.python,
                    roots if roots is not None else PluginRoots(),
                )
            )
        except BaseException:  # the faults closed themselves
            for lease in leases:
                if lease is not None:
                    lease.release()
            raise
        self._start_members(fleet, plan, folder, leases, told, warm_start)
        if plan.python:  # only a Python member reports in at the barrier
            self._await_arrivals(fleet)
        fleet.released_t = fleet.group.release()
        raced_names = fleet.raced_names()
        for server in fleet.servers:
            server.released_t, server.raced_names = fleet.released_t, raced_names
        armed_faults.released(fleet.released_t)
        self._watch(fleet, ready, timeout)
        armed_faults.settle()
        for server in fleet.servers:
            if server.state == "exited" and server.returncode:
                reason = armed_faults.failure_cause(server.index)
                if reason:
                    server.reason = f"{server.reason}; {reason}" if server.reason else reason
        misses = armed_faults.misses()
        if misses:
            raise AssertionError("\n".join([*misses, fleet.summary()]))
        return fleet

    def _warm_start(
        self,
        plan: _Plan,
        program: str,
        warm: bool | str | None,
        preload: Sequence[str] | None,
        timeout: float,
        native_accesses: bool,
        port: int | None,
    ) -> WarmStart | None:
        """How the members start (``warm/templates.py``): None for cold starts as asked. A probe runs
        member 0's command (it stops before it binds ``port``)."""
        choice = warm_choice(warm, preload, self.warm_default)
        if choice == "off":
            return None
        if self.warm_templates is None:
            raise StartupGuardError("warm starts need the server_fleet fixture's templates")
        watched = [str(self.folder), str(self.controller.folder)]
        cache = self.default_cache
        watched += [str(cache.root)] if cache is not None else []
        if self.races is not None:
            watched += [str(root) for root in self.races.roots.roots().values()]
        return self.warm_templates.for_launch(
            choice,
            plan.label,
            plan.command(0, port),
            program,
            plan.env,
            str(plan.cwd if plan.cwd is not None else Path.cwd()),
            preload,
            watch=watched,
            timeout=timeout,
            native_accesses=native_accesses,
        )

    def _native_preload(self, env: Mapping[str, str]) -> dict[str, str]:
        """``LD_PRELOAD`` of the native interposer, built once per run into the run's temp
        folder, the one every xdist worker shares (the port leases' parent): a clear error
        where it cannot be built (no C compiler)."""
        where = "server_fleet.launch(native_accesses=True)"
        library = interposer_library(self.leases.folder.parent, where, env)
        return preload_env(library, env)

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
            if self.online_env is not None:
                base_env.update(self.online_env)
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
        self,
        label: str,
        count: int,
        timeout: float,
        faults: ArmedFaults,
        workers: int | None,
    ) -> tuple[Fleet, Path]:
        """A fleet with no members yet, behind a new barrier, and the folder for their output."""
        group = self.controller.barrier(count)
        folder = self.folder / f"fleet-{len(self.fleets)}"
        folder.mkdir(parents=True, exist_ok=True)
        fleet = Fleet(
            label,
            timeout,
            group,
            self.controller,
            self.reaper,
            faults,
            self.races,
            workers_wanted=workers,
        )
        self.fleets.append(fleet)
        return fleet, folder

    def _start_members(
        self,
        fleet: Fleet,
        plan: _Plan,
        folder: Path,
        leases: list[Lease | None],
        told: list[int | None],
        warm_start: WarmStart | None = None,
    ) -> None:
        """Start one member per lease, each told its port; if any start fails, stop those
        already started."""
        try:
            for index, lease in enumerate(leases):
                self._start_member(fleet, plan, folder, index, lease, told[index], warm_start)
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
        warm_start: WarmStart | None = None,
    ) -> None:
        """Start member ``index`` (held at the start barrier if it runs Python) into the fleet."""
        command = plan.command(index, port)
        output_path = folder / f"server-{index}.log"
        handle = open(output_path, "wb")  # noqa: SIM115 - closed when the fleet stops
        env = {
            **plan.env,
            **(plan.member_env[index] if plan.member_env else {}),
            **fleet.group.member_env(index),
            # Last: the fleet's marker, which its stop (and the reaper) ends by.
            **fleet.marker_env,
        }
        process: subprocess.Popen[bytes] | ForkedProcess
        if warm_start is not None and warm_start.template is not None:
            try:
                cwd = str(plan.cwd if plan.cwd is not None else Path.cwd())
                process = warm_start.fork(command, env, cwd, output_path)
            except BaseException:
                handle.close()
                raise
        else:
            process = subprocess.Popen(
                command,
                env=env,
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
                server.reason = self._exit_reason(fleet, server, code)
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
                    printable(f"{probe.describe()} failed: {type(error).__name__}: {error}"),
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
                server.state, server.reason = "rejected", printable(verdict.detail)
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
                + (f": {printable(detail)}" if detail else "")
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

    def _exit_reason(self, fleet: Fleet, server: Server, code: int) -> str:
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"killed by {name}"
        hints = []
        # Its output is searched a block at a time: it may have printed a lot.
        if not printed_something(server.output_path):
            hints.append("it printed nothing")
        address_in_use = server.output_mentions("Address already in use")
        hints += fleet.armed_faults.exit_causes(
            server.index, address_in_use=address_in_use, port=server.port
        )
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
