"""Watching a released fleet come up: each member on its own thread, until it is decided.

A member is ready (its probe says so, and with ``workers=N`` N of its workers are up), rejected
(it answered, wrongly), exited (fail-fast: its own watch ends at once, its siblings go on), hung
(still not ready at the time-out: its Python stacks are collected) or undecided (the machine
never gave it its time). The time-out counts the member's own time (``runtime/own_time.py``): on
a busy machine the time it waits for a CPU is not held against it, so "hung" means what it means
on a quiet machine. Past ``MAX_STRETCH`` times the time-out in wall time, a member that has still
not had its time is "undecided": the machine was too slow to decide.

A member in a port fault is probed on the port its own tree listens on (``own_port``); a port
probe waits until it listens on one: another process's socket proves nothing.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field, replace

from pytest_startup_guard.fleet import ready as ready_module
from pytest_startup_guard.fleet.exit_wait import ExitWait
from pytest_startup_guard.fleet.fleet import Fleet, RunningMember
from pytest_startup_guard.fleet.output import printed_something
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.fleet.workers import leftover_kind, listening_pids
from pytest_startup_guard.runtime.controller import RuntimeController
from pytest_startup_guard.runtime.own_time import MAX_STRETCH, OwnClock
from pytest_startup_guard.wording import printable

POLL_SECONDS = 0.01  # how often a member's exit and probe are looked at
WAIT_SAMPLE_EVERY = 5  # polls between two reads of a member's CPU wait (it is gone once reaped)


class FleetWatcher:
    """Watches every member of one released fleet until each is decided, then collects the
    stacks of those that hung or stayed undecided."""

    def __init__(
        self, controller: RuntimeController, fleet: Fleet, probe: ready_module.Probe
    ) -> None:
        assert fleet.released_t is not None, "a fleet is watched once it was released"
        self.controller = controller
        self.fleet = fleet
        self.probe = probe
        self.released = fleet.released_t

    def watch(self) -> None:
        deadline = self.released + self.fleet.timeout
        threads = [
            threading.Thread(target=self._watch_member, args=(running, deadline), daemon=True)
            for running in self.fleet.running
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for running in self.fleet.running:
            if running.server.state in ("hung", "undecided"):
                for pid in sorted(self.fleet.members_pids(running.server)):
                    stack = self.controller.dump_stacks(pid)
                    if stack:
                        running.server.stacks[pid] = stack

    def _watch_member(self, running: RunningMember, deadline: float) -> None:
        server = running.server
        faults = self.fleet.port_faults
        watch = _MemberWatch(
            self.fleet,
            running,
            self.probe,
            deadline,
            OwnClock(server.pid, self.released),
            ready_module.Member(server.index, server.pid, server.port, server.output_path),
            faulted=faults.involves(server.index),
        )
        with ExitWait(running.process.pid) as exit_wait:
            # Not Popen.wait(timeout): it polls waitpid from 0.5 ms up, and 32 members doing
            # that on 2 cores slow down the very servers being watched. A member that exits
            # wakes this sleep at once (a caught race ends when its first server dies).
            while not watch.step():
                exit_wait.sleep(POLL_SECONDS)


@dataclass
class _MemberWatch:
    """One member's watch: ``step`` looks once at its exit and its probe, and says whether it
    is decided (its ``server`` then holds the verdict)."""

    fleet: Fleet
    running: RunningMember
    probe: ready_module.Probe
    deadline: float
    clock: OwnClock
    member: ready_module.Member  # as the probe sees it: its port may move (a port fault)
    faulted: bool  # it is in a port fault: probed on the port its own tree listens on
    owned: bool = False  # the port it is probed on is one its own tree listens on
    detail: str = ""  # the probe's last words on why it is not ready yet
    polls: int = field(default=0)

    @property
    def server(self) -> Server:
        return self.running.server

    def step(self) -> bool:
        server, released = self.server, self.clock.started
        if self.polls % WAIT_SAMPLE_EVERY == 0:
            server.seconds_waiting = self.clock.waited()  # read while the process is there
        self.polls += 1
        code = self.running.process.poll()
        if code is not None:
            server.state, server.returncode = "exited", code
            server.seconds_to_exit = time.monotonic() - released
            server.reason = exit_reason(self.fleet, server, code)
            return True
        verdict = self._probe_once()
        if verdict is None:
            return True
        now = time.monotonic()
        verdict = self._with_workers(verdict, now)
        if verdict.ready:
            if self.faulted:
                server.port, server.port_owned = self.member.port, self.owned
            server.state, server.ready, server.seconds_to_ready = "ready", True, now - released
            server.seconds_waiting = self.clock.waited()
            return True
        if verdict.rejected:
            server.state, server.reason = "rejected", printable(verdict.detail)
            return True
        self.detail = verdict.detail or self.detail
        return now >= self.deadline and self._decided(now)

    def _probe_once(self) -> ready_module.Verdict | None:
        """The probe's verdict, or None once a probe that cannot work rejected the member."""
        port = self.member.port
        if self.faulted:
            port, self.owned = self.fleet.port_faults.own_port(self.server.index)
            if port is not None and port != self.member.port:
                self.member = replace(self.member, port=port)
        port_probe = isinstance(self.probe, (ready_module.Http, ready_module.Tcp))
        try:
            if self.faulted and port_probe and port is None:
                return ready_module.NOT_YET  # it listens on nothing of its own yet
            return self.probe.check(self.member)
        except Exception as error:  # a probe that cannot work is the test's error: say so
            self.server.state, self.server.reason = (
                "rejected",
                printable(f"{self.probe.describe()} failed: {type(error).__name__}: {error}"),
            )
            return None

    def _with_workers(self, verdict: ready_module.Verdict, now: float) -> ready_module.Verdict:
        """Not ready while fewer than ``launch(workers=N)`` of its workers are up."""
        wanted = self.fleet.workers_wanted
        if not verdict.ready or wanted is None:
            return verdict
        up = len(self.fleet.workers_up(self.server, now))
        if up >= wanted:
            return verdict
        return ready_module.Verdict(
            False, f"{up} of {wanted} workers up (launch(workers={wanted}))"
        )

    def _decided(self, now: float) -> bool:
        """Past the wall deadline: hung if it had its time, undecided if the machine never
        gave it that time within ``MAX_STRETCH`` x the time-out, else keep watching."""
        server, clock, probe, detail = self.server, self.clock, self.probe, self.detail
        timeout = self.deadline - clock.started
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


def exit_reason(fleet: Fleet, server: Server, code: int) -> str:
    """Why a member exited before it was ready, as far as can be told: the signal, or hints
    from its output, the launch's faults and, for a clean exit, what it left behind."""
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
        hints.append(_clean_exit_hint(fleet, server))
    return "; ".join(hints)


def _clean_exit_hint(fleet: Fleet, server: Server) -> str:
    """Why a member that exited 0 before it was ready did so, as far as can be told.

    The daemonizing hint is given only where a process left behind still serves (listens
    on a port); a supervisor that gave up after its workers died is named for that, and
    what it left behind for what each process is."""
    fleet.catch_up(server)
    workers = server.workers
    failed = server.failed_workers(workers)
    orphans = _orphans(server)
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


def _orphans(server: Server) -> list[int]:
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


__all__ = ["POLL_SECONDS", "FleetWatcher", "exit_reason"]
