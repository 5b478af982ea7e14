"""``Server``: one fleet member and what became of it, in a few words or in full.

Its state (``ServerState``), its times (seconds since its fleet's release), its exit, and what
its fleet reads for it when asked: the races' hits and its workers (``workers.py``). Its
``report`` is the block a failure message shows: state, workers, root causes, hits, the last
lines of its output and the stacks of a hung member. What of it came from the process (its
output, causes, stacks, the reason its probe gave) is shown ``printable``, and its output is
read in bounded memory (``output.py``), however much it printed; only ``output`` reads it all.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pytest_startup_guard.fleet import output as output_file
from pytest_startup_guard.fleet.workers import (
    Worker,
    exception_lines,
)
from pytest_startup_guard.races.armed import Hit
from pytest_startup_guard.wording import printable

TAIL_LINES = 15
# What became of a member: still starting, ready (its probe accepted it), rejected (it
# answered, wrongly), exited before it was ready, hung (not ready at the time-out, having had
# its time), undecided (the machine never gave it its time), or stopped before any of these.
ServerState = Literal["starting", "ready", "rejected", "exited", "hung", "undecided", "stopped"]
# The states whose status is followed by the exit code, where there is one (an exit names it).
EXIT_CODE_NOTED: tuple[ServerState, ...] = ("ready", "rejected", "hung", "undecided", "stopped")


def short_path(path: str) -> str:
    """A path in a message, by its last three parts, a commit or blob hash cut to 8 characters:
    ``snapshots/fb7c3780.../model.safetensors``."""
    parts = [
        _HASH.sub(lambda match: match.group(0)[:8] + "...", part) for part in Path(path).parts[-3:]
    ]
    return "/".join(parts)


def _quoted(cause: str, met: list[str]) -> bool:
    """Whether a cause line is already said at the end of a ``met_causes`` line."""
    return any(line.endswith(f": {cause}") for line in met)


_HASH = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


def _no_hits(server: Server) -> list[Hit]:
    return []


def _no_workers(server: Server) -> list[Worker]:
    return []


# How many exception lines of a member's output a failure message quotes.
CAUSE_LINES = 3


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
    # The exception lines of its output, and the output's size when they were read.
    _exceptions_read: tuple[int, list[str]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def output(self) -> str:
        """All its output (as much memory as it printed: the plugin itself reads less)."""
        try:
            return self.output_path.read_text(errors="replace")
        except OSError:
            return ""

    def output_mentions(self, text: str) -> bool:
        """Whether its output contains ``text``, read a block at a time."""
        return output_file.mentions(self.output_path, text)

    def output_search(self, pattern: str | re.Pattern[str]) -> re.Match[str] | None:
        """The first match of ``pattern`` in its output so far, read a chunk at a time: a
        match must lie within ``output.WINDOW_CHARS`` characters, as for ``ready.log``."""
        compiled = re.compile(pattern)
        follower = output_file.OutputFollower(self.output_path)
        try:
            size = self.output_path.stat().st_size
        except OSError:
            return None
        while True:
            match = follower.search(compiled)
            if match is not None or follower.offset >= size:
                return match

    def exception_lines(self) -> list[str]:
        """The exception lines of its output (``workers.exception_lines``), read a block at a
        time, once for each size the output had when asked."""
        try:
            size = self.output_path.stat().st_size
        except OSError:
            return []
        if self._exceptions_read is None or self._exceptions_read[0] != size:
            lines = exception_lines(output_file.blocks(self.output_path), self.raced_names)
            self._exceptions_read = (size, lines)
        return self._exceptions_read[1]

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
        ended = sorted(
            (
                worker
                for worker in workers
                if worker.failed
                and (self.stopped_t is None or (worker.ended_t or 0.0) < self.stopped_t)
            ),
            key=lambda worker: worker.ended_t or 0.0,
        )
        failed: list[Worker] = []
        for worker in ended:
            if failed and worker.exit_code == -signal.SIGTERM:
                continue  # its supervisor ended it after a worker failed (uvicorn does)
            failed.append(worker)
        return failed

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
        lines = self.exception_lines()
        return f": {lines[0]} (from the output)" if lines else ""

    def root_causes(self) -> list[str]:
        """The root-cause lines of a failed start-up: first, for each of its processes that
        met a race's change and then failed, what it met, where and when, then the first line of
        its exception (``met_causes``); then each failed worker's own exception and the
        output's exception lines (those naming a raced file first), each once and not again."""
        met = self.met_causes()
        causes: dict[str, None] = dict.fromkeys(met)
        for worker in self.failed_workers():
            if worker.cause:
                causes.setdefault(f"{worker.label()}: {worker.cause}", None)
        for line in self.exception_lines()[:CAUSE_LINES]:
            causes.setdefault(line, None)
        return [cause for cause in causes if cause in met or not _quoted(cause, met)]

    def met_causes(self) -> list[str]:
        """For each process of this member that met a race's change and then failed (the
        member itself, or a worker that died): which change it met, at which access and when,
        then the first line of its exception, even when the exception names no file (a Rust
        loader's ``header too small``): the access says which file it was."""
        firsts: dict[int, Hit] = {}
        for hit in sorted(self.hits, key=lambda hit: hit.t):
            firsts.setdefault(hit.pid, hit)
        failed = {worker.pid: worker for worker in self.failed_workers()}
        lines = []
        for pid, hit in firsts.items():
            if pid == self.pid:
                exceptions = self.exception_lines()
                then = f"; then it failed: {exceptions[0]}" if exceptions else self._end_words()
                who = f"pid {pid}"
            elif pid in failed:
                worker = failed[pid]
                then = (
                    f"; then it failed: {worker.cause}"
                    if worker.cause
                    else f"; then it {worker.end_words()}"
                )
                who = f"{worker.label()}"
            else:
                continue  # a worker that met the change and lived: not a cause of the failure
            at = f"+{self.seconds_since_release(hit.t):.3f} s"
            met = hit.found or f"a race's change at {short_path(hit.path)}"
            lines.append(
                f"{who} met {met}, at its {hit.op} of {short_path(hit.path)} at {at}{then}"
            )
        return lines

    def _end_words(self) -> str:
        """How the member itself ended, for a cause line with no exception to quote."""
        if self.returncode is None:
            return f"; then it did not start up ({self.state})"
        return f"; then it exited with code {self.returncode}"

    def tail(self, lines: int = TAIL_LINES) -> str:
        """Its last ``lines`` lines of output, read from the end of the file, ``printable``."""
        return output_file.tail(self.output_path, lines)

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
            status = f"came up WRONG: {printable(self.reason)}"
        elif self.state == "hung":
            status = f"HUNG: not ready and still running at the time-out ({printable(self.reason)})"
        elif self.state == "undecided":
            status = f"UNDECIDED: the machine was too slow to decide ({printable(self.reason)})"
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
            lines.append(f"    {printable(self.reason)}")
        workers = self.workers
        lines.extend(f"    {line}" for line in self._worker_lines(workers))
        if not self.started_up:
            lines.extend(f"    root cause: {line}" for line in self.root_causes())
        hits = self.hits
        if hits:
            counts: dict[str, int] = {}
            for hit in hits:
                what = f"{hit.op} {short_path(hit.path)}"
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
            lines.extend(f"    | {line}" for line in printable(stack).rstrip().splitlines())
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
            elif worker.exit_code == -signal.SIGTERM and failed:
                words += " (ended by its supervisor after a worker failed)"
            elif self.stopped_t is not None and (worker.ended_t or 0.0) >= self.stopped_t:
                words += " (when the fleet was stopped)"
            lines.append(words)
        return lines
