"""Workers: every Python process under a fleet member, each judged on its own fate.

Real serving stacks start their own workers (``uvicorn --workers 4``, ``gunicorn -w 4``, a
launcher that spawns its API servers). A probe on a shared socket is answered by the first
worker up, and a supervisor may outlive, ignore or respawn a worker that died, so the member's
own fate says little. Every Python process that reports in under a member's label (its
descendants, through spawn, fork and exec) is a worker here, with what the child runtime saw
of it: when it started, whether it did start-up work (an access of the cache or of a raced
path, or a bind), and how it ended (its parent's ``waitpid`` status, else its own goodbye,
else nothing: gone without a word) and why (its first uncaught exception).

A worker that did start-up work and ended with a non-zero code or a signal, or without a word,
before the fleet was stopped, failed: its member's start-up failed too. Processes that are
meant to be short (multiprocessing's resource tracker never reports in; a helper that exits 0)
are not failures.

A worker is **up** when it reported in, is still running, did its start-up work and has since
been quiet (no access of the cache or of a raced path) for ``QUIET_SECONDS`` of its own time:
a worker still retrying a read is not up, and one that waits for requests is. That holds for a
uvicorn or vLLM-style worker (its config is read before it serves) and for a gunicorn worker
(its application is imported before it serves) alike.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    AccessEvent,
    ProcessRecord,
)
from pytest_startup_guard.runtime.own_time import OwnClock
from pytest_startup_guard.wording import printable, signal_name

# A worker is up once quiet this long (own time) after its last access: longer than the
# backoff of a realistic retry (0.1 s, then 0.2 s), short enough not to slow a launch much.
QUIET_SECONDS = 0.5

# A child of the member, or a process further down its tree.
WorkerRole = Literal["worker", "grandchild"]


@dataclass(frozen=True)
class Worker:
    """One Python process under a member, and what became of it (monotonic seconds)."""

    pid: int
    ppid: int
    role: WorkerRole
    argv: tuple[str, ...]
    started_t: float  # when it reported in
    startup_work: bool  # touched the cache or a raced path, or bound a port
    first_access_t: float | None
    last_access_t: float | None
    ended_t: float | None  # None: still running
    exit_code: int | None  # negative: the signal that ended it; None: not known
    known_from: str  # "reaped" (its parent's waitpid), "bye" (its own goodbye) or ""
    cause: str | None  # its first uncaught exception: "OSError: ..."

    @property
    def ended(self) -> bool:
        return self.ended_t is not None

    @property
    def without_a_word(self) -> bool:
        """It ended, but no exit status reached the plugin (no goodbye, nobody reaped it)."""
        return self.ended and self.exit_code is None

    @property
    def failed(self) -> bool:
        """It did start-up work and ended with a failure: a non-zero code, a signal, or no word."""
        return self.startup_work and self.ended and self.exit_code != 0

    def end_words(self) -> str:
        """'exited with code 3', 'killed by SIGKILL', 'ended without a word ...', 'running'."""
        if not self.ended:
            return "running"
        if self.exit_code is None:
            return "ended without a word (no exit status reached the plugin: killed by a signal?)"
        if self.exit_code < 0:
            return f"killed by {signal_name(-self.exit_code)}"
        return f"exited with code {self.exit_code}"

    def label(self) -> str:
        """'worker pid 1234', 'grandchild pid 1240'."""
        return f"{self.role} pid {self.pid}"


@dataclass
class WorkerAccesses:
    """When each pid first and last touched a watched path (read off the controller's list)."""

    first: dict[int, float] = field(default_factory=dict)
    last: dict[int, float] = field(default_factory=dict)
    counted: int = 0  # accesses read so far: the list only grows

    def update(self, accesses: Sequence[AccessEvent]) -> None:
        for event in accesses[self.counted :]:
            self.first.setdefault(event.pid, event.t)
            self.last[event.pid] = event.t
        self.counted = len(accesses)


def workers_under(
    controller: RuntimeController,
    member: str,
    member_pid: int,
    accesses: WorkerAccesses,
) -> list[Worker]:
    """Every process that reported in under ``member`` but the member itself, oldest first."""
    with controller.lock:
        accesses.update(controller.accesses)
        bound = {event.pid for event in controller.binds}
        records = [
            record
            for record in controller.processes.values()
            if record.member == member and record.pid != member_pid
        ]
    return sorted(
        (_worker(record, member_pid, accesses, bound) for record in records),
        key=lambda worker: worker.started_t,
    )


def _worker(
    record: ProcessRecord, member_pid: int, accesses: WorkerAccesses, bound: set[int]
) -> Worker:
    first = accesses.first.get(record.pid)
    return Worker(
        pid=record.pid,
        ppid=record.ppid,
        role="worker" if record.ppid == member_pid else "grandchild",
        argv=tuple(record.argv),
        started_t=record.hello_t,
        startup_work=first is not None or record.pid in bound,
        first_access_t=first,
        last_access_t=accesses.last.get(record.pid),
        ended_t=record.ended_t,
        exit_code=record.exit_code,
        known_from=record.exit_known,
        # What the process says of its exception: shown on terminals and in reports.
        cause=printable(record.cause) if record.cause else record.cause,
    )


class QuietWatch:
    """Tells which workers are up: started up and quiet for ``QUIET_SECONDS`` of own time.

    Own time, because a worker that waits for a CPU is not quiet by choice: on a loaded machine
    "quiet for 0.5 s" means what it means on an idle one.
    """

    def __init__(self, quiet: float = QUIET_SECONDS) -> None:
        self.quiet = quiet
        self._clocks: dict[int, tuple[float | None, OwnClock]] = {}

    def settled(self, worker: Worker, now: float) -> bool:
        """Ended, or (with start-up work done) quiet long enough since its last access."""
        if worker.ended:
            return True
        if not worker.startup_work:
            return False
        seen = self._clocks.get(worker.pid)
        if seen is None or seen[0] != worker.last_access_t:
            seen = (worker.last_access_t, OwnClock(worker.pid, now))
            self._clocks[worker.pid] = seen
        return seen[1].own(now) >= self.quiet

    def up(self, workers: Iterable[Worker], now: float) -> list[Worker]:
        """The workers that are up: running, started up, and quiet since."""
        return [w for w in workers if not w.ended and self.settled(w, now)]


def settle(
    read: Callable[[], list[Worker]], deadline: float, watch: QuietWatch | None = None
) -> list[Worker]:
    """Wait until every worker that started up has ended or gone quiet, or until ``deadline``
    (monotonic): a worker still retrying is judged on how its retries end."""
    watch = watch if watch is not None else QuietWatch()
    while True:
        workers = read()
        now = time.monotonic()
        busy = [w for w in workers if w.startup_work and not watch.settled(w, now)]
        if not busy or now >= deadline:
            return workers
        time.sleep(0.02)


_EXCEPTION_LINE = re.compile(
    r"^\s*(?:[A-Za-z_][\w]*\.)*(?P<name>[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt))"
    r"(?::\s*(?P<message>.*))?$"
)


# A block of output without one of these words has no exception line: it is not split.
_EXCEPTION_WORD = re.compile(r"Error|Exception|Exit|Interrupt")
# Of each kind (naming a raced file, or not), the first this many exception lines are kept: a
# server that logs an error a line for minutes must not fill the plugin's memory.
MAX_EXCEPTION_LINES = 50


def exception_lines(output: str | Iterable[str], names: Iterable[str] = ()) -> list[str]:
    """The exception lines of an output (``OSError: ... config.json``), first seen first, those
    naming one of ``names`` (a raced file) before the others; each line once, ``printable``.
    ``output``: the text, or its blocks of whole lines (``output.blocks``)."""
    wanted = [name for name in names if name]
    naming: dict[str, None] = {}
    others: dict[str, None] = {}
    for block in [output] if isinstance(output, str) else output:
        if not _EXCEPTION_WORD.search(block):
            continue
        for line in block.splitlines():
            match = _EXCEPTION_LINE.match(line)
            if match and (match.group("message") or match.group("name").endswith("Error")):
                kind = naming if any(name in line for name in wanted) else others
                if len(kind) < MAX_EXCEPTION_LINES:
                    kind.setdefault(line.strip(), None)
    return [printable(line) for line in [*naming, *others]]


def leftover_kind(pid: int, workers: Sequence[Worker]) -> str:
    """What a process left running after its member exited is: 'resource tracker', 'worker',
    'grandchild', or 'process' (one the child runtime never heard of)."""
    for worker in workers:
        if worker.pid == pid:
            return worker.role
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "process"
    if "resource_tracker" in argv or "semaphore_tracker" in argv:
        return "resource tracker"
    if "forkserver" in argv:
        return "forkserver"
    return "process"


def listening_pids(pids: Iterable[int]) -> set[int]:
    """The pids among ``pids`` that listen on a TCP port (they still serve)."""
    import psutil

    serving = set()
    for pid in pids:
        try:
            process = psutil.Process(pid)
            # psutil 6 renamed connections() to net_connections(); 5.9 has only the old name.
            read = getattr(process, "net_connections", None) or process.connections
            connections = read(kind="inet")
        except (psutil.Error, OSError):
            continue
        if any(c.status == psutil.CONN_LISTEN for c in connections):
            serving.add(pid)
    return serving
