"""``FleetLauncher``: N real server processes started at the same moment.

``launch`` takes one checked ``LaunchSpec`` (``spec.py``): it arms the launch's faults
(``faults.armed``) before any member starts, plans what each member runs (``plan.py``), starts
every process behind the child runtime's start barrier (cold, or forked from a warm template:
``warm/``), releases them together, and hands the fleet to its ``FleetWatcher``
(``watcher.py``), which follows each member until it is decided. Output goes to a file per
member, never to a pipe that could fill up. A fault that no member met then fails the launch,
and a lock fault names itself in the reason of a member that failed after it held such a lock
at once with another.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import IO

from pytest_startup_guard.cache.hubcache import FakeHubCache
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.faults.armed import ArmedFaults, ArmingPlace, LaunchShape
from pytest_startup_guard.fleet.fleet import Fleet, RunningMember
from pytest_startup_guard.fleet.plan import (
    LaunchPlan,
    describe_probe,
    needs_port,
    resolve_command,
    runs_python,
)
from pytest_startup_guard.fleet.ports import Lease, PortLeases
from pytest_startup_guard.fleet.reaper import Reaper
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.fleet.spec import LaunchSpec
from pytest_startup_guard.fleet.warm.forked import ForkedProcess
from pytest_startup_guard.fleet.warm.templates import (
    WarmMode,
    WarmRequest,
    WarmStart,
    WarmTemplates,
    warm_choice,
)
from pytest_startup_guard.fleet.watcher import FleetWatcher
from pytest_startup_guard.races.hubrace import HubRace
from pytest_startup_guard.races.roots import PluginRoots
from pytest_startup_guard.runtime.controller import RuntimeController
from pytest_startup_guard.runtime.native.build import interposer_library, preload_env


@contextmanager
def _given_back_on_error(leases: Sequence[Lease | None]) -> Iterator[None]:
    """The leased ports go back if what the block does fails (nothing holds them yet)."""
    try:
        yield
    except BaseException:
        for lease in leases:
            if lease is not None:
                lease.release()
        raise


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
        ``stop``/teardown. The spec was checked where it was built (``LaunchSpec.checked``); a
        fault that no member met raises ``AssertionError`` here, unless it was made with
        ``allow_miss=True``."""
        __tracebackhide__ = True
        roots = self.races.roots if self.races is not None else None
        ready = spec.ready
        shape = LaunchShape(spec.count, needs_port(spec.argv, ready), describe_probe(ready), roots)
        faults = ArmedFaults(spec.faults, shape)  # checked here, before anything starts
        plan, program = self._plan(spec)
        leases = self._lease_ports(spec)
        told = faults.told_ports([lease.port if lease is not None else None for lease in leases])
        plan = replace(plan, told=tuple(told))
        with _given_back_on_error(leases):
            warm_start = self._warm_start(plan, program, spec, told)
            fleet, folder = self._new_fleet(plan.label, spec, faults)
            if warm_start is not None:
                fleet.start_lines.append(warm_start.line(spec.count))
            place = ArmingPlace(
                self.controller,
                fleet.group.name,
                told,
                _FleetMembers(fleet),
                plan.python,
                roots if roots is not None else PluginRoots(),
            )
            faults.arm(place)  # on an error, the faults closed themselves
        self._start_members(fleet, plan, folder, leases, told, warm_start)
        if plan.python:  # only a Python member reports in at the barrier
            self._await_arrivals(fleet)
        self._release(fleet)
        FleetWatcher(self.controller, fleet, ready).watch()
        faults.settle()
        for server in fleet.servers:
            if server.state == "exited" and server.returncode:
                reason = faults.failure_cause(server.index)
                if reason:
                    server.reason = f"{server.reason}; {reason}" if server.reason else reason
        misses = faults.misses()
        if misses:
            raise AssertionError("\n".join([*misses, fleet.summary()]))
        return fleet

    def _plan(self, spec: LaunchSpec) -> tuple[LaunchPlan, str]:
        """What each member runs (its ports not told yet), and the program that runs."""
        base_env = self._environment(self._watched_cache(spec.cache), spec.env)
        if spec.native_accesses:
            base_env.update(self._native_preload(base_env))
        program = resolve_command(spec.argv[0], base_env, spec.cwd)
        plan = LaunchPlan(
            list(spec.argv),
            spec.count,
            base_env,
            spec.cwd,
            runs_python(program),
            tuple(spec.member_env),
        )
        return plan, program

    def _release(self, fleet: Fleet) -> None:
        """Every member goes at once; its faults hear when."""
        fleet.released_t = fleet.group.release()
        raced_names = fleet.raced_names()
        for server in fleet.servers:
            server.released_t, server.raced_names = fleet.released_t, raced_names
        fleet.armed_faults.released(fleet.released_t)

    def _warm_start(
        self, plan: LaunchPlan, program: str, spec: LaunchSpec, told: Sequence[int | None]
    ) -> WarmStart | None:
        """How the members start (``warm/templates.py``): None for cold starts as asked. A probe runs
        member 0's command (it stops before it binds its port); every member's command and
        environment are judged against what the template's imports read."""
        choice = warm_choice(spec.warm, spec.preload, self.warm_default)
        if choice == "off":
            return None
        if self.warm_templates is None:
            raise StartupGuardError("warm starts need the server_fleet fixture's templates")
        watched = [str(self.folder), str(self.controller.folder)]
        cache = self.default_cache
        watched += [str(cache.root)] if cache is not None else []
        if self.races is not None:
            watched += [str(root) for root in self.races.roots.roots().values()]
        members = [
            (
                plan.command(index, port),
                {**plan.env, **(plan.member_env[index] if plan.member_env else {})},
            )
            for index, port in enumerate(told)
        ]
        request = WarmRequest(
            plan.label,
            members[0][0],
            program,
            plan.env,
            str(plan.cwd if plan.cwd is not None else Path.cwd()),
            spec.preload,
            watched,
            spec.timeout,
            spec.native_accesses,
            members,
        )
        return self.warm_templates.for_launch(choice, request)

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

    def _lease_ports(self, spec: LaunchSpec) -> list[Lease | None]:
        """One lease per member: the ports asked for, free ones where argv or the probe needs
        a port, else None."""
        if spec.ports is not None:
            return list(self.leases.lease_exactly(list(spec.ports)))
        if needs_port(spec.argv, spec.ready):
            return list(self.leases.lease(spec.count))
        return [None] * spec.count

    def _new_fleet(self, label: str, spec: LaunchSpec, faults: ArmedFaults) -> tuple[Fleet, Path]:
        """A fleet with no members yet, behind a new barrier, and the folder for their output."""
        group = self.controller.barrier(spec.count)
        folder = self.folder / f"fleet-{len(self.fleets)}"
        folder.mkdir(parents=True, exist_ok=True)
        fleet = Fleet(
            label,
            spec.timeout,
            group,
            self.controller,
            self.reaper,
            faults,
            self.races,
            workers_wanted=spec.workers,
        )
        self.fleets.append(fleet)
        return fleet, folder

    def _start_members(
        self,
        fleet: Fleet,
        plan: LaunchPlan,
        folder: Path,
        leases: list[Lease | None],
        told: list[int | None],
        warm_start: WarmStart | None = None,
    ) -> None:
        """Start one member per lease, each told its port; if any start fails, stop those
        already started."""
        try:
            if warm_start is not None and warm_start.template is not None:
                self._fork_members(fleet, plan, folder, leases, told, warm_start)
            else:
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

    def _member_env(self, fleet: Fleet, plan: LaunchPlan, index: int) -> dict[str, str]:
        return {
            **plan.env,
            **(plan.member_env[index] if plan.member_env else {}),
            **fleet.group.member_env(index),
            # Last: the fleet's marker, which its stop (and the reaper) ends by.
            **fleet.marker_env,
        }

    def _start_member(
        self,
        fleet: Fleet,
        plan: LaunchPlan,
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
            env=self._member_env(fleet, plan, index),
            cwd=plan.cwd,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a process group per member: trees end together
        )
        self._add_member(fleet, plan, index, lease, port, command, output_path, handle, process)

    def _fork_members(
        self,
        fleet: Fleet,
        plan: LaunchPlan,
        folder: Path,
        leases: list[Lease | None],
        told: list[int | None],
        warm_start: WarmStart,
    ) -> None:
        """Fork every member from the template in one request: it forks one after the other
        without waiting for us between them (a launch of 17 forks paid a round trip each).
        Each forked member joins the fleet before a failed fork is raised, so that the stop
        that follows ends it."""
        cwd = str(plan.cwd if plan.cwd is not None else Path.cwd())
        commands = [plan.command(index, told[index]) for index in range(len(leases))]
        outputs = [folder / f"server-{index}.log" for index in range(len(leases))]
        handles = [open(path, "wb") for path in outputs]  # noqa: SIM115 - closed at the stop
        try:
            forked = warm_start.fork_many(
                [
                    (command, self._member_env(fleet, plan, index), cwd, outputs[index])
                    for index, command in enumerate(commands)
                ]
            )
        except BaseException:
            for handle in handles:
                handle.close()
            raise
        refusal: BaseException | None = None
        for index, process in enumerate(forked):
            if isinstance(process, BaseException):
                handles[index].close()
                refusal = refusal or process
                continue
            self._add_member(
                fleet,
                plan,
                index,
                leases[index],
                told[index],
                commands[index],
                outputs[index],
                handles[index],
                process,
            )
        if refusal is not None:
            raise refusal

    def _add_member(
        self,
        fleet: Fleet,
        plan: LaunchPlan,
        index: int,
        lease: Lease | None,
        port: int | None,
        command: list[str],
        output_path: Path,
        handle: IO[bytes],
        process: subprocess.Popen[bytes] | ForkedProcess,
    ) -> None:
        """A started member into the fleet, before anything else can fail, so that its stop
        ends this one too."""
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
        fleet.add(RunningMember(server, process, lease, handle))
        if plan.python:
            self.controller.expect(process.pid, f"server {index}: {plan.label}")

    def _await_arrivals(self, fleet: Fleet) -> None:
        """Wait until every member still running has reached the start barrier."""
        by_index = {running.server.index: running.process for running in fleet.running}
        fleet.group.wait_for_arrivals(
            time.monotonic() + self.barrier_timeout, lambda i: by_index[i].poll() is None
        )

    def stop_all(self) -> None:
        for fleet in self.fleets:
            fleet.stop()
