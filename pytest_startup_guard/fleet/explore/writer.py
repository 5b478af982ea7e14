"""``server_fleet.explore_writer``: the real writer paused at each step, the readers at each point.

A clean run of the readers (a fleet, as ``launch`` takes it) on the initial cache gives the
access points (each process's nth access under the cache's hub folder, those of the busiest
process, as ``server_fleet.explore`` counts them); two clean runs of the writer give its steps
(``writer_steps``), and must take the same ones. Then, for each step k that changes what readers
see (the state after it differs from the state before it, as a listing of the cache with each
file's content shows, or it takes or releases a lock) and each point j, one pair:

1. the cache is put back as it was before the first run (a copy of it);
2. the writer starts, and is held at its first step; the readers start, and each process is held
   at its access j (the accesses before it met the initial state);
3. once every reader is held there (or has ended), the writer runs to just after step k (held
   before step k+1; after its last step, it runs to its end);
4. the readers are let go and finish their start-up against that state; then the writer goes on.

A pair fails if a reader is not ready (its reason, as fleets give it) or if the writer exits
non-zero. Every wait is decided by what the processes did, never by a wall clock: a reader
that tries a lock the held writer holds waits on it, and the writer goes on at once; a writer
held while the readers make no new access for ``PATIENCE`` seconds of their own time goes on,
and readers held while the writer makes no new access for as long (it waits on their lock) are
let go; the pair says so, and that is no failure.

A writer with a template (``Writer.template_argv``: ``hub_remote.writer``) is started once and
forks one writer per run: each run costs its download, not the import of huggingface_hub.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pytest_startup_guard.cache.hubcache import FakeHubCache
from pytest_startup_guard.checks import parse_pair
from pytest_startup_guard.errors import InvalidArgumentError, StartupGuardError
from pytest_startup_guard.fleet.explore.request import failure_line
from pytest_startup_guard.fleet.explore.writer_steps import (
    LOCK_OPS,
    WRITER_MEMBER,
    ForkedRun,
    StateRecorder,
    Writer,
    WriterRun,
    WriterStep,
    WriterTemplate,
    command_label,
    steps_of,
    writer_accesses,
)
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.launcher import FleetLauncher
from pytest_startup_guard.fleet.spec import LaunchSpec
from pytest_startup_guard.races.exploration import AccessPoint, ExploreSettings
from pytest_startup_guard.races.hubrace import busiest_process
from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    TEST_PROCESS,
    AccessAnswer,
    AccessEvent,
    RuntimeListener,
)
from pytest_startup_guard.runtime.observation import unobserved
from pytest_startup_guard.runtime.own_time import OwnClock

PairOutcome = Literal["survived", "failed", "not reached"]
Phase = Literal["before", "writing", "reading", "finishing"]

PAIR_FLAG = "--startup-guard-writer-pair"
PAIR_ENV = "STARTUP_GUARD_WRITER_PAIR"
# Seconds of the waiting side's own time without a new access of the other side after which a
# held process goes on: the other side waits on it (a lock it holds), and would wait forever.
PATIENCE = 3.0
ASK_AGAIN = 0.005  # seconds a held process sleeps before it asks again
PAIR_SLOT = "STEP:POINT"  # where a replay command takes the pair


@dataclass(frozen=True)
class WriterSettings:
    """What the run says about writer explorations: the one pair to run (a replay), where that
    was given, and the command that replays one pair of this test (``PAIR_SLOT`` in it stands
    for the pair)."""

    only_pair: tuple[int, int] | None = None
    source: str = PAIR_FLAG
    replay: str | None = None

    def replay_of(self, step: int, point: int) -> str:
        if self.replay is None:
            return f"server_fleet.explore_writer(..., pairs=[({step}, {point})])"
        return self.replay.replace(PAIR_SLOT, f"{step}:{point}")


def writer_settings_of(explore: ExploreSettings) -> WriterSettings:
    """The settings where the plugin gave none: the pair from ``PAIR_ENV``, and a replay
    command that sets it, built from the command that replays an explore point."""
    raw = os.environ.get(PAIR_ENV)
    pair = None
    if raw is not None and raw.strip():
        try:
            pair = parse_pair(raw)
        except ValueError as error:
            raise InvalidArgumentError(
                f"invalid {PAIR_ENV} {raw!r} (environment variable): {error}"
            ) from None
    replay = None
    if explore.replay_point is not None:
        base = explore.replay_point.rstrip("=").rsplit(" --", 1)[0]
        replay = f"{PAIR_ENV}={PAIR_SLOT} {base}"
    return WriterSettings(pair, f"{PAIR_ENV} (environment variable)", replay)


@dataclass
class WriterPair:
    """How the readers and the writer fared with the writer held just after ``step`` and the
    readers held at ``point`` until then."""

    step: WriterStep
    point: AccessPoint
    outcome: PairOutcome
    reason: str | None  # why it failed: a reader's, or the writer's
    replay: str  # the command that runs this pair alone
    notes: list[str] = field(default_factory=list)  # a held side let go, steps that differed
    writer_code: int | None = None
    seconds: float = 0.0

    @property
    def key(self) -> str:
        """``3:1``: what ``--startup-guard-writer-pair`` takes."""
        return f"{self.step.number}:{self.point.number}"

    def line(self) -> str:
        head = (
            f"step {self.step.describe()}  x  point {self.point.number}"
            f" {self.point.op.removeprefix('os.')} {self.point.short_path}: {self.outcome.upper()}"
        )
        parts = [head]
        if self.reason:
            parts.append(f"    {self.reason}")
        parts.extend(f"    note: {note}" for note in self.notes)
        if self.outcome == "failed":
            parts.append(f"    replay: {self.replay}")
        return "\n".join(parts)


@dataclass
class WriterExploration:
    """What ``server_fleet.explore_writer`` found: the writer's ``steps``, the readers'
    ``points`` and one ``WriterPair`` per explored (step, point)."""

    writer: str
    readers: str
    steps: list[WriterStep] = field(default_factory=list)
    points: list[AccessPoint] = field(default_factory=list)
    pairs: list[WriterPair] = field(default_factory=list)
    seconds: float = 0.0  # the whole exploration, clean runs included
    pairs_seconds: float = 0.0  # the pairs alone

    @property
    def failures(self) -> list[WriterPair]:
        return [pair for pair in self.pairs if pair.outcome == "failed"]

    @property
    def states(self) -> int:
        """States explored: the pairs run."""
        return len(self.pairs)

    @property
    def states_per_second(self) -> float:
        """Pairs run per second of the time spent running them."""
        return self.states / self.pairs_seconds if self.pairs_seconds > 0 else 0.0

    def __str__(self) -> str:
        explored = sum(1 for step in self.steps if step.changes)
        head = (
            f"explore_writer: {self.writer}: {len(self.steps)} steps ({explored} that change"
            f" the cache) x {len(self.points)} reader points: {len(self.pairs)} pairs,"
            f" {len(self.failures)} failed, {self.seconds:.1f} s"
            f" ({self.states_per_second:.2f} states/s)"
        )
        return "\n".join([head, *(pair.line() for pair in self.pairs)])

    def assert_no_failures(self) -> None:
        __tracebackhide__ = True
        if self.failures:
            lines = [pair.line() for pair in self.failures]
            raise AssertionError(
                f"{len(self.failures)} of {len(self.pairs)} pairs failed with the writer"
                f" {self.writer} and the readers {self.readers}:\n" + "\n".join(lines)
            )


class _PairGate(RuntimeListener):
    """Holds the writer and the readers of one pair in the order of its steps 2-4."""

    def __init__(
        self,
        hub_prefix: str,
        hold_at: int,  # the writer's access held (k + 1): the state after step k shows
        point: int,
        count: int,
        run: WriterRun,
        before: set[int],  # pids that said hello before: not readers
    ) -> None:
        self.hub_prefix = hub_prefix
        self.hold_at = hold_at
        self.point = point
        self.count = count
        self.run = run
        self.before = before
        self.phase: Phase = "before"
        self.writer_count = 0
        self.reader_counts: dict[int, int] = {}
        self.held: set[str] = set()  # reader members with a process held at the point
        self.group: str | None = None
        self.seen: set[tuple[int, str, str]] = set()  # readers' accesses since they were let go
        # Each reader process's own time since its last new access (its start: none yet).
        self.reader_clocks: dict[int, OwnClock] = {}
        self.held_pids: set[int] = set()
        self.writer_clock: OwnClock | None = None  # since the writer's last access
        self.notes: list[str] = []
        # The writer's lock calls per path: an odd count, it holds that lock (take, release).
        self.writer_locks: dict[str, int] = {}

    # -- who is who ------------------------------------------------------------------------

    def _is_reader(self, event: AccessEvent) -> bool:
        member = event.member
        if member is None or member in (WRITER_MEMBER, TEST_PROCESS) or event.pid in self.before:
            return False
        if self.group is None:
            self.group = member.rsplit(":", 1)[0]
        return member.rsplit(":", 1)[0] == self.group

    def _members_ended(self) -> set[str]:
        if self.group is None:
            return set()
        records: dict[str, list[bool]] = {}
        for record in self.run.controller.processes.values():
            if record.member is not None and record.member.startswith(f"{self.group}:"):
                records.setdefault(record.member, []).append(record.ended_t is not None)
        return {member for member, ended in records.items() if all(ended)}

    # -- the phases ------------------------------------------------------------------------

    def on_access(self, event: AccessEvent) -> AccessAnswer | None:
        if self.phase == "finishing":
            return None
        if event.member == WRITER_MEMBER:
            return self._writer(event)
        if self._is_reader(event):
            return self._reader(event)
        return None

    def on_gone(self, pid: int) -> None:
        if pid == self.run.pid and self.phase in ("before", "writing"):
            self._let_readers_go()

    def _writer(self, event: AccessEvent) -> AccessAnswer | None:
        wait = AccessAnswer(wait=ASK_AGAIN)
        if not event.again:
            if not event.path.startswith(self.hub_prefix):
                return None
            self.writer_count += 1
            self.writer_clock = OwnClock(event.pid)
            if event.op in LOCK_OPS:
                self.writer_locks[event.path] = self.writer_locks.get(event.path, 0) + 1
            if self.phase == "before":
                return wait  # held at its first step until the readers are at the point
            if self.phase == "writing" and self.writer_count >= self.hold_at:
                self._let_readers_go()
                return wait
            return None
        if self.phase == "before":
            self._maybe_start_writing()
            return wait if self.phase == "before" else None
        if self.phase == "reading":
            if self._readers_idle():
                self.notes.append(
                    f"the readers made no new access for {PATIENCE:g} s of their own time while"
                    f" the writer was held after step {self.hold_at - 1}: they waited on it (its"
                    " lock?); it went on"
                )
                self.phase = "finishing"
                return None
            return wait
        return None

    def _reader(self, event: AccessEvent) -> AccessAnswer | None:
        wait = AccessAnswer(wait=ASK_AGAIN)
        if not event.path.startswith(self.hub_prefix):
            return None
        if not event.again:
            count = self.reader_counts.get(event.pid, 0) + 1
            self.reader_counts[event.pid] = count
            if self.phase == "reading":
                held_lock = self.writer_locks.get(event.path, 0) % 2
                if event.op in LOCK_OPS and held_lock and not event.path.endswith("(deleted)"):
                    lock = event.path[len(self.hub_prefix) :]
                    self.notes.append(
                        f"a reader waits on the lock the held writer holds ({lock}): the writer"
                        " went on"
                    )
                    self.phase = "finishing"
                    return None
                key = (event.pid, event.op, event.path)
                if key not in self.seen:
                    self.seen.add(key)
                    self.reader_clocks[event.pid] = OwnClock(event.pid)
                return None
            if count == self.point and event.member is not None:
                self.held.add(event.member)
                self.held_pids.add(event.pid)
                if self.phase == "before":
                    self._maybe_start_writing()
                return wait
            self.reader_clocks[event.pid] = OwnClock(event.pid)
            return None
        if self.phase == "before":
            self._maybe_start_writing()
            return wait
        if self.phase == "writing":
            if self.run.ended():
                self._let_readers_go()
                return None
            clock = self.writer_clock
            if clock is not None and clock.own() >= PATIENCE:
                self.notes.append(
                    f"the writer made no new access for {PATIENCE:g} s of its own time while the"
                    f" readers were held at point {self.point}: it waited on them (their lock?);"
                    " they went on"
                )
                self._let_readers_go()
                return None
            return wait
        return None

    def _maybe_start_writing(self) -> None:
        """Once every reader is held at the point (or has ended), the writer goes on; so it
        does when the readers made no new access for ``PATIENCE`` of their own time (one that
        was ready before the point)."""
        if self.run.ended():
            self._let_readers_go()
            return
        members = {f"{self.group}:{index}" for index in range(self.count)} if self.group else set()
        done = self.held | self._members_ended()
        waited_out = bool(members) and self._readers_idle(but=self.held_pids)
        if (members and members <= done) or waited_out:
            if waited_out and not members <= done:
                self.notes.append(
                    f"not every reader reached point {self.point} (no new access for"
                    f" {PATIENCE:g} s of their own time): the writer went on"
                )
            self.phase = "writing"
            self.writer_clock = OwnClock(self.run.pid)
            if self.writer_count >= self.hold_at:
                self._let_readers_go()

    def _let_readers_go(self) -> None:
        self.phase = "reading"
        self.reader_clocks = {}  # each one's own time from now until its first new access

    def _readers_idle(self, but: set[int] | frozenset[int] = frozenset()) -> bool:
        """Every live reader process (but those in ``but``) made no new access for
        ``PATIENCE`` seconds of its own time: a process starved of CPU has had no time."""
        group = self.group
        if group is None:
            return False
        live = [
            record.pid
            for record in self.run.controller.processes.values()
            if record.member is not None
            and record.member.startswith(f"{group}:")
            and record.ended_t is None
            and record.pid not in but
        ]
        for pid in live:
            if pid not in self.reader_clocks:
                self.reader_clocks[pid] = OwnClock(pid)
        # None left: they ended (or are all held), nobody waits on anybody.
        return bool(live) and all(self.reader_clocks[pid].own() >= PATIENCE for pid in live)

    def finish(self) -> None:
        """The readers' launch returned: the writer goes on."""
        self.phase = "finishing"


@dataclass
class WriterExplorer:
    """One ``explore_writer`` call."""

    launcher: FleetLauncher
    settings: WriterSettings
    folder: Path
    readers: LaunchSpec  # the readers' fleet, as explore_writer was given it
    runs: int = 0
    template: WriterTemplate | None = None

    @property
    def controller(self) -> RuntimeController:
        return self.launcher.controller

    def run(
        self,
        writer: Writer,
        pairs: Sequence[tuple[int, int]] | None = None,
        points: Sequence[int] | None = None,
    ) -> WriterExploration:
        __tracebackhide__ = True
        started = time.monotonic()
        cache = writer.cache
        hub_prefix = str(cache.hub_dir).rstrip(os.sep) + os.sep
        self.controller.watch(cache.hub_dir)
        exploration = WriterExploration(writer.label, command_label(self.readers.argv))
        initial = self.folder / "initial"
        self.folder.mkdir(parents=True, exist_ok=True)
        with unobserved():
            shutil.copytree(cache.root, initial, symlinks=True)
        if getattr(writer, "template_argv", None) is not None:
            self.template = WriterTemplate(writer, self.controller, self.folder)
        try:
            exploration.points = self._points(cache, initial, hub_prefix)
            exploration.steps = self._steps(writer, initial)
            wanted = self._wanted(pairs, points, exploration)
            pairs_started = time.monotonic()
            for step, point in wanted:
                exploration.pairs.append(
                    self._pair(writer, initial, hub_prefix, exploration.steps, step, point)
                )
            exploration.pairs_seconds = time.monotonic() - pairs_started
        finally:
            if self.template is not None:
                self.template.close()
            self._restore(cache, initial)
            exploration.seconds = time.monotonic() - started
        return exploration

    # -- the clean runs --------------------------------------------------------------------

    def _points(self, cache: FakeHubCache, initial: Path, hub_prefix: str) -> list[AccessPoint]:
        self._restore(cache, initial)
        before = len(self.controller.accesses)
        fleet = self._launch()
        try:
            bad = [server for server in fleet.servers if not server.ready]
            if bad:
                raise StartupGuardError(
                    "server_fleet.explore_writer(): the readers fail without the writer, so"
                    " there is nothing to explore:\n" + "\n".join(s.report() for s in bad)
                )
            pids: dict[int, str] = {}
            for server in fleet.servers:
                for pid in sorted(fleet.members_pids(server)):
                    pids[pid] = f"reader {server.index}"
            with self.controller.lock:
                clean = [
                    access
                    for access in self.controller.accesses[before:]
                    if access.pid in pids and access.path.startswith(hub_prefix)
                ]
        finally:
            fleet.stop()
        if not clean:
            raise StartupGuardError(
                f"server_fleet.explore_writer(): the readers' clean start-up never accessed"
                f" {cache.hub_dir}, so there is no point to hold them at (do they read this"
                " cache? is their interpreter under the plugin?)"
            )
        return [
            AccessPoint(number, access.op, access.path[len(hub_prefix) :], pids[access.pid])
            for number, access in enumerate(busiest_process(clean), 1)
        ]

    def _steps(self, writer: Writer, initial: Path) -> list[WriterStep]:
        found: list[list[WriterStep]] = []
        recorder = StateRecorder(writer.cache.hub_dir)
        for attempt in range(2):  # twice: a writer whose steps vary cannot be explored step by step
            self._restore(writer.cache, initial)
            before = len(self.controller.accesses)
            if attempt == 0:
                self.controller.subscribe(recorder)
            run = self._start(writer)
            try:
                code = run.wait(self._timeout())
                if code != 0:
                    why = run.cause() or _last_error(run.output()) or "no exception"
                    status = "did not finish" if code is None else f"exited with code {code}"
                    raise StartupGuardError(
                        f"server_fleet.explore_writer(): the writer {writer.label} {status}"
                        f" without any reader ({why}), so there is nothing to explore; its"
                        f" output:\n{run.output()}"
                    )
            finally:
                self.controller.unsubscribe(recorder)
                run.end()
            steps = steps_of(writer_accesses(self.controller, before), writer.cache.hub_dir)
            if attempt == 0:
                steps = recorder.changes(steps)
            if not steps:
                raise StartupGuardError(
                    f"server_fleet.explore_writer(): the writer {writer.label} made no file"
                    f" operation under {writer.cache.hub_dir}: there is no step to pause it at"
                    " (does it write this cache? is its interpreter under the plugin?)"
                )
            found.append(steps)
        first, second = found
        for one, other in zip(first, second, strict=False):
            if one.identity() != other.identity():
                raise StartupGuardError(
                    f"server_fleet.explore_writer(): the writer {writer.label} is not"
                    f" deterministic: its step {one.number} was {one.describe()!r} in one clean"
                    f" run and {other.describe()!r} in the next (threads? give it one worker)"
                )
        if len(first) != len(second):  # (zip above stopped at the shorter)
            raise StartupGuardError(
                f"server_fleet.explore_writer(): the writer {writer.label} is not"
                f" deterministic: it took {len(first)} steps in one clean run and"
                f" {len(second)} in the next"
            )
        return first

    def _wanted(
        self,
        pairs: Sequence[tuple[int, int]] | None,
        numbers: Sequence[int] | None,
        exploration: WriterExploration,
    ) -> list[tuple[WriterStep, AccessPoint]]:
        steps, points = exploration.steps, exploration.points
        given: Sequence[tuple[int, int]] | None = pairs
        where = "pairs= of server_fleet.explore_writer()"
        if self.settings.only_pair is not None:
            given, where = [self.settings.only_pair], self.settings.source
        if given is None:
            for number in numbers or ():
                if number > len(points):
                    raise InvalidArgumentError(
                        f"invalid points={list(numbers or ())!r} for"
                        f" server_fleet.explore_writer(): the readers' clean start-up has"
                        f" {len(points)} points (1 to {len(points)})"
                    )
            held = [point for point in points if numbers is None or point.number in numbers]
            return [(step, point) for step in steps if step.changes for point in held]
        wanted = []
        for step_number, point_number in given:
            if not 1 <= step_number <= len(steps) or not 1 <= point_number <= len(points):
                raise InvalidArgumentError(
                    f"invalid pair {step_number}:{point_number} ({where}): the writer took"
                    f" {len(steps)} steps (1 to {len(steps)}) and the readers have"
                    f" {len(points)} points (1 to {len(points)})"
                )
            wanted.append((steps[step_number - 1], points[point_number - 1]))
        return wanted

    # -- one pair --------------------------------------------------------------------------

    def _pair(
        self,
        writer: Writer,
        initial: Path,
        hub_prefix: str,
        clean: list[WriterStep],
        step: WriterStep,
        point: AccessPoint,
    ) -> WriterPair:
        started = time.monotonic()
        self._restore(writer.cache, initial)
        before_accesses = len(self.controller.accesses)
        with self.controller.lock:
            before = set(self.controller.processes)
        run = self._start(writer)
        gate = _PairGate(hub_prefix, step.number + 1, point.number, self.readers.count, run, before)
        self.controller.subscribe(gate)
        fleet: Fleet | None = None
        code: int | None = None
        try:
            fleet = self._launch()
            with self.controller.lock:
                gate.finish()
            code = run.wait(self._timeout())
        finally:
            self.controller.unsubscribe(gate)
            if fleet is not None:
                fleet.stop()
            run.end()
        assert fleet is not None
        notes = list(gate.notes)
        taken = steps_of(writer_accesses(self.controller, before_accesses), writer.cache.hub_dir)
        notes.extend(_differences(taken, clean, step))
        failing = [server for server in fleet.servers if not server.ready]
        reasons = [f"reader {failure_line(server)}" for server in failing]
        if code != 0:
            status = "did not finish" if code is None else f"exited with code {code}"
            cause = run.cause() or _last_error(run.output())
            reasons.append(f"writer: {status}" + (f": {cause}" if cause else ""))
        outcome: PairOutcome = "failed" if reasons else "survived"
        if not reasons and not gate.held:
            outcome = "not reached"
        return WriterPair(
            step,
            point,
            outcome,
            "; ".join(reasons) or None,
            self.settings.replay_of(step.number, point.number),
            notes,
            code,
            time.monotonic() - started,
        )

    # -- helpers ---------------------------------------------------------------------------

    def _start(self, writer: Writer) -> WriterRun:
        self.runs += 1
        if self.template is not None:
            return ForkedRun(
                self.template, self.controller, self.folder, self.runs, self._timeout()
            )
        return WriterRun(writer, self.controller, self.folder, self.runs)

    def _launch(self) -> Fleet:
        return self.launcher.launch(self.readers)

    def _timeout(self) -> float:
        return self.readers.timeout

    @staticmethod
    def _restore(cache: FakeHubCache, initial: Path) -> None:
        """Put the cache back as it was before the first run (every file a copy: a writer that
        rewrites in place must not reach the saved state)."""
        with unobserved():
            for entry in cache.root.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            shutil.copytree(initial, cache.root, symlinks=True, dirs_exist_ok=True)


def _differences(taken: list[WriterStep], clean: list[WriterStep], step: WriterStep) -> list[str]:
    """A note where the writer's steps up to the one it was held at were not those of its
    clean run: the readers changed what it found (took its lock, made a file it meant to)."""
    for mine, theirs in zip(taken[: step.number + 1], clean[: step.number + 1], strict=False):
        if mine.identity() != theirs.identity():
            return [
                f"the writer's step {mine.number} was {mine.describe()!r}, not"
                f" {theirs.describe()!r} as in its clean run: the readers changed what it found"
            ]
    return []


_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b")


def _last_error(output: str) -> str | None:
    lines = [line.strip() for line in output.splitlines() if _ERROR_LINE.match(line.strip())]
    return lines[-1][:300] if lines else None


__all__ = [
    "PAIR_ENV",
    "PAIR_FLAG",
    "PAIR_SLOT",
    "WriterExploration",
    "WriterExplorer",
    "WriterPair",
    "WriterSettings",
    "parse_pair",
    "writer_settings_of",
]
