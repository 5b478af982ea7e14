"""The rows of a start-up test's timeline, from its entry in the JSON report: one time zero and one
row order, which every timeline shows (the text one, ``timeline``, and the SVG, ``svg``).

``timeline_rows(test)`` reads one entry of the report's ``tests[]`` (or the same facts as a
test's reports carry: ``races``, ``fleets``, ``processes``, ``accesses``) and returns a
``Timeline``, or None when there is nothing to draw (no race and no fleet):

- **time zero** (``zero_of``): the release of the first fleet that was released, else the set-up
  of the test's start-up fixtures (the report's own 0);
- **the extent**: from the first event to the last (every window's opening and closing, access,
  hit, release, server milestone and hello, and zero); a window still open and a process still
  running end at the last event (a process gone at the teardown, long after, would squeeze the
  rest);
- **the rows**: one per race, the first ``MAX_RACE_ROWS``, with its windows; then one per process,
  the first ``MAX_PROCESS_ROWS``: each fleet server followed by its Python descendants (the
  processes of its member), fleet by fleet, then every other process that said hello or touched
  the cache (the test process, strays), by pid;
- **on a process row**: its running stretch (from its hello, or its fleet's release, to its exit
  or the end), its fleet's milestones (exit, ready, hang, undecided: counted from the release,
  placed only where there is one) and its accesses of the cache, a *hit* where an access met an
  open window of a race;
- **on a worker's row** (a process of a server's ``workers[]``), the mark of its end:
  ``worker-failed`` (it failed: its server's start-up failed), ``worker-stopped`` (it ended when
  its fleet was stopped: not judged; placed at the end at the latest, as a process still running
  is) or ``worker-ended`` (any other end: a helper that exited, one that did no start-up work).

Pure: it reads plain dicts, and a view turns the rows into characters or shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_startup_guard.wording import count

MAX_RACE_ROWS = 8
MAX_PROCESS_ROWS = 30
TEST_MEMBER = "test"  # the member of the test process's accesses (runtime's TEST_PROCESS)
# The marks of a worker's end, by how it ended.
WORKER_ENDS = ("worker-failed", "worker-stopped", "worker-ended")

# The access ops shown as a listing; the others but open change something (a rename, a lock).
LISTINGS = frozenset({"os.listdir", "os.scandir"})


def _is_number(value: object) -> bool:
    """A number of the report (a bool is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: object) -> float | None:
    """``value`` as seconds, or None where the report has no number."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def zero_of(test: Mapping[str, Any]) -> tuple[float, str]:
    """The time labelled 0 (the report's seconds) and what happened then: the release of the
    first fleet that was released, else the set-up of the test's start-up fixtures."""
    fleets = list(test.get("fleets") or [])
    for number, fleet in enumerate(fleets, 1):
        released = _number(fleet.get("released"))
        if released is not None:
            what = "release of the fleet" if len(fleets) == 1 else f"release of fleet {number}"
            return released, what
    return 0.0, "set-up of the test's start-up fixtures"


@dataclass(frozen=True)
class Window:
    """A window of a race: ``end`` is its closing, or the timeline's end if it is still open."""

    index: int
    opened: float
    end: float
    still_open: bool
    facts: Mapping[str, Any]  # the report's window


@dataclass(frozen=True)
class Mark:
    """An instant on a process row."""

    t: float
    kind: str  # a server's exit, ready, hang, undecided; an access: hit, open, listing;
    # a worker's end: WORKER_ENDS
    facts: Mapping[str, Any]  # the report's entry: the server, the hit, the access, the worker
    after: float = 0.0  # a server's milestone, a worker's end: seconds after its fleet's release
    race: str = ""  # a hit: its race
    order: int = 0  # a hit: its place among the test's hits, race by race


@dataclass
class RaceRow:
    number: int  # its place among the races, from 0
    name: str
    facts: Mapping[str, Any]  # the report's race
    windows: list[Window] = field(default_factory=list)


@dataclass
class ProcessRow:
    kind: str  # server, child, process
    label: str  # server 0, fleet 2 server 0, fleet 2 server 0 child, test, pid 123
    pid: int | None
    member: str | None  # whose process it is: server 0, fleet 2 server 0, test; None: nobody's
    facts: Mapping[str, Any]  # a server row: the report's server; else its process ({}: none)
    fleet: int = 0  # a server and its children: the fleet's number, from 1
    released: float | None = None  # a server: its fleet's release
    run: tuple[float, float] | None = None  # running from, to
    marks: list[Mark] = field(default_factory=list)

    @property
    def text(self) -> str:
        """What the row's label shows: ``server 0 pid 7``, ``  child pid 8``, ``test pid 9``."""
        if self.kind == "child":
            return f"  child pid {self.pid}"
        if self.label == f"pid {self.pid}":
            return self.label
        return f"{self.label} pid {self.pid}"


@dataclass
class Timeline:
    """The rows of one test's timeline and what did not fit, on one time axis."""

    zero: float
    what: str  # what happened at zero
    start: float
    end: float
    races: list[RaceRow]
    rows: list[ProcessRow]
    releases: list[tuple[int, float, int]]  # fleet number, its release, its servers
    fleets: int  # how many fleets the test launched
    races_left_out: int
    processes_left_out: int
    hits_total: int  # every hit of every race, those the report did not list included

    def notes(self) -> list[tuple[str, int, str]]:
        """(what, how many, the line) for the rows that did not fit."""
        notes = []
        if self.races_left_out:
            more = count(self.races_left_out, "more race")
            notes.append(("races", self.races_left_out, f"{more} not drawn (see the JSON report)"))
        if self.processes_left_out:
            more = count(self.processes_left_out, "more process", "more processes")
            notes.append(
                ("processes", self.processes_left_out, f"{more} not drawn (see the artifacts)")
            )
        return notes


def _server_names(fleets: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Each server's member name as the report writes it: ``server 0``, ``fleet 2 server 0``."""
    return [
        [
            (f"fleet {number} " if len(fleets) > 1 else "") + f"server {server.get('index', i)}"
            for i, server in enumerate(fleet.get("servers") or [])
        ]
        for number, fleet in enumerate(fleets, 1)
    ]


def _milestones(server: Mapping[str, Any], released: float) -> list[Mark]:
    """Exit, ready, then hang or undecided (of equal rank, a later mark wins a shared place)."""
    marks = []
    for key, kind in (("seconds_to_exit", "exit"), ("seconds_to_ready", "ready")):
        after = _number(server.get(key))
        if after is not None:
            marks.append(Mark(released + after, kind, server, after))
    after = _number(server.get("seconds_to_timeout"))
    if after is not None:
        kind = "hang" if server.get("state") == "hung" else "undecided"
        marks.append(Mark(released + after, kind, server, after))
    return marks


def _stopped(worker: Mapping[str, Any], stopped: float | None) -> bool:
    """Whether the worker ended when its fleet was stopped (not failed: its stop ended it)."""
    ended = _number(worker.get("ended"))
    return ended is not None and stopped is not None and ended >= stopped


def worker_end_kind(worker: Mapping[str, Any], stopped: float | None) -> str | None:
    """The mark of a worker's end (``WORKER_ENDS``), or None while it runs; ``stopped`` is its
    fleet's stop (the report's ``stopped``)."""
    if _number(worker.get("ended")) is None:
        return None
    if worker.get("failed"):
        return "worker-failed"
    return "worker-stopped" if _stopped(worker, stopped) else "worker-ended"


def _worker_ends(
    fleet: Mapping[str, Any], server: Mapping[str, Any], end: float
) -> dict[int, Mark]:
    """The end mark of each worker of ``server`` that ended, by pid; an end at the fleet's stop
    after the timeline's end is placed at the end (the stop comes at the teardown, long after)."""
    stopped = _number(fleet.get("stopped"))
    released = _number(fleet.get("released"))
    marks = {}
    for worker in server.get("workers") or []:
        kind = worker_end_kind(worker, stopped)
        ended = _number(worker.get("ended"))
        if kind is None or ended is None or not isinstance(worker.get("pid"), int):
            continue
        t = min(ended, end) if kind == "worker-stopped" else ended
        after = ended - released if released is not None else 0.0
        marks[worker["pid"]] = Mark(t, kind, worker, after)
    return marks


def _access_marks(
    test: Mapping[str, Any], races: Sequence[Mapping[str, Any]], every_access: bool
) -> dict[int, list[Mark]]:
    """Each process's accesses by pid: the hits of every race, then (``every_access``) the
    other accesses."""
    marks: dict[int, list[Mark]] = {}
    hits: set[tuple[int, float]] = set()
    order = 0
    for race in races:
        name = str(race.get("name", "?"))
        for hit in race.get("hits") or []:
            t = _number(hit.get("t"))
            if t is None or not isinstance(hit.get("pid"), int):
                continue
            marks.setdefault(hit["pid"], []).append(Mark(t, "hit", hit, race=name, order=order))
            hits.add((hit["pid"], t))
            order += 1
    for access in test.get("accesses") or [] if every_access else []:
        t = _number(access.get("t"))
        pid = access.get("pid")
        if t is None or not isinstance(pid, int) or (pid, t) in hits:
            continue  # a hit is recorded from its access: the pid and the time tell it
        op = access.get("op")
        kind = "open" if op == "open" else "listing" if op in LISTINGS else "change"
        marks.setdefault(pid, []).append(Mark(t, kind, access))
    return marks


def _first_accesses(
    test: Mapping[str, Any], races: Sequence[Mapping[str, Any]]
) -> dict[int, Mapping[str, Any]]:
    """Each process that touched the cache (a hit counts), by pid: the facts of its first
    access that names its member (else its first). Which processes get a row does not depend
    on which marks a view draws."""
    first: dict[int, Mapping[str, Any]] = {}
    hits = (hit for race in races for hit in race.get("hits") or [])
    for access in [*hits, *(test.get("accesses") or [])]:
        pid = access.get("pid")
        if isinstance(pid, int) and (pid not in first or not first[pid].get("member")):
            first[pid] = access
    return first


def _extent(
    test: Mapping[str, Any],
    races: Sequence[Mapping[str, Any]],
    fleets: Sequence[Mapping[str, Any]],
    processes: Sequence[Mapping[str, Any]],
    zero: float,
) -> tuple[float, float]:
    """The first and the last event the timeline shows (zero included)."""
    times = [zero]
    for race in races:
        times += [h["t"] for h in race.get("hits") or [] if _is_number(h.get("t"))]
        for window in race.get("windows") or []:
            times += [window[k] for k in ("opened", "closed") if _is_number(window.get(k))]
    times += [a["t"] for a in test.get("accesses") or [] if _is_number(a.get("t"))]
    for fleet in fleets:
        released = _number(fleet.get("released"))
        if released is None:
            continue  # its servers' seconds count from the release: without one they place nowhere
        times.append(released)
        stopped = _number(fleet.get("stopped"))
        for server in fleet.get("servers") or []:
            times += [mark.t for mark in _milestones(server, released)]
            times += [
                float(worker["ended"])
                for worker in server.get("workers") or []
                if _is_number(worker.get("ended")) and not _stopped(worker, stopped)
            ]
    times += [p["hello"] for p in processes if _is_number(p.get("hello"))]
    return float(min(times)), float(max(times))


@dataclass(frozen=True)
class _Activity:
    """What the processes of a test did, by pid: the material of their rows."""

    hello: dict[int, float]  # when each said hello to the controller
    gone: dict[int, float]  # when its connection closed (it exited or exec'd)
    accesses: dict[int, list[Mark]]
    accessors: dict[int, Mapping[str, Any]]  # each pid that touched the cache: its first access
    end: float  # the last event: a process still running is drawn up to it

    def run(self, pid: int, begin: float | None) -> tuple[float, float] | None:
        """Running from ``begin`` until it was gone, or the end."""
        return None if begin is None else (begin, min(self.gone.get(pid, self.end), self.end))


def _fleet_rows(
    fleets: Sequence[Mapping[str, Any]],
    processes: Sequence[Mapping[str, Any]],
    activity: _Activity,
    shown: set[int],
) -> list[ProcessRow]:
    """A row per server, each followed by its children's; adds their pids to ``shown``."""
    rows: list[ProcessRow] = []
    for number, (fleet, names) in enumerate(zip(fleets, _server_names(fleets), strict=True), 1):
        released = _number(fleet.get("released"))
        for server, name in zip(fleet.get("servers") or [], names, strict=True):
            pid = server.get("pid") if isinstance(server.get("pid"), int) else None
            row = ProcessRow("server", name, pid, name, server, number, released)
            row.marks = _milestones(server, released) if released is not None else []
            exited = next((mark.t for mark in row.marks if mark.kind == "exit"), None)
            if pid is None:
                row.run = None if released is None else (released, activity.end)
            else:
                row.run = activity.run(pid, activity.hello.get(pid, released))
                row.marks += activity.accesses.get(pid, [])
                shown.add(pid)
            if row.run is not None and exited is not None:
                row.run = (row.run[0], exited)  # it runs until its exit
            rows.append(row)
            ends = _worker_ends(fleet, server, activity.end)
            for process in processes:
                child = process["pid"]
                if process.get("member") == name and child not in shown:
                    rows.append(ProcessRow("child", f"{name} child", child, name, process, number))
                    rows[-1].run = activity.run(child, activity.hello.get(child))
                    rows[-1].marks += activity.accesses.get(child, [])
                    if child in ends:  # a worker: its row ends with the mark of its end
                        rows[-1].marks.append(ends[child])
                        if rows[-1].run is not None:
                            rows[-1].run = (rows[-1].run[0], min(ends[child].t, activity.end))
                    shown.add(child)
    return rows


def _other_rows(
    processes: Sequence[Mapping[str, Any]], activity: _Activity, shown: set[int]
) -> list[ProcessRow]:
    """A row per other process that said hello or touched the cache: the test process, strays."""
    by_pid = {process["pid"]: process for process in processes}
    rows = []
    for pid in sorted((set(by_pid) | set(activity.accessors)) - shown):
        process = by_pid.get(pid, {})
        member = (process or activity.accessors[pid]).get("member") or None
        label = "test" if member == TEST_MEMBER else f"pid {pid}"
        row = ProcessRow("process", label, pid, member, process)
        row.run = activity.run(pid, activity.hello.get(pid))
        row.marks += activity.accesses.get(pid, [])
        rows.append(row)
    return rows


def _race_rows(races: Sequence[Mapping[str, Any]], end: float) -> list[RaceRow]:
    """A row per race (the first ``MAX_RACE_ROWS``) with its windows."""
    return [
        RaceRow(
            number,
            str(race.get("name", "?")),
            race,
            [
                Window(
                    index,
                    float(window["opened"]),
                    float(window["closed"]) if _is_number(window.get("closed")) else end,
                    not _is_number(window.get("closed")),
                    window,
                )
                for index, window in enumerate(race.get("windows") or [])
                if _is_number(window.get("opened"))
            ],
        )
        for number, race in enumerate(races[:MAX_RACE_ROWS])
    ]


def timeline_rows(test: Mapping[str, Any], *, every_access: bool = True) -> Timeline | None:
    """The timeline of one test (an entry of the JSON report's ``tests[]``), or None when
    there is nothing to draw: no race and no fleet. A view that marks only the hits (the SVG)
    passes ``every_access=False``: the rows, zero and extent stay the same, and the other
    accesses are not made into marks (a chaos run has thousands)."""
    races = list(test.get("races") or [])
    fleets = list(test.get("fleets") or [])
    if not (races or fleets):
        return None
    processes = [p for p in test.get("processes") or [] if isinstance(p.get("pid"), int)]
    zero, what = zero_of(test)
    start, end = _extent(test, races, fleets, processes, zero)
    activity = _Activity(
        hello={p["pid"]: float(p["hello"]) for p in processes if _is_number(p.get("hello"))},
        gone={p["pid"]: float(p["gone"]) for p in processes if _is_number(p.get("gone"))},
        accesses=_access_marks(test, races, every_access),
        accessors=_first_accesses(test, races),
        end=end,
    )
    shown: set[int] = set()  # one row per process: a server's child is not a stray as well
    rows = _fleet_rows(fleets, processes, activity, shown)
    rows += _other_rows(processes, activity, shown)
    releases = [
        (number, float(fleet["released"]), len(fleet.get("servers") or []))
        for number, fleet in enumerate(fleets, 1)
        if _is_number(fleet.get("released"))
    ]
    return Timeline(
        zero=zero,
        what=what,
        start=start,
        end=end,
        races=_race_rows(races, end),
        rows=rows[:MAX_PROCESS_ROWS],
        releases=releases,
        fleets=len(fleets),
        races_left_out=max(0, len(races) - MAX_RACE_ROWS),
        processes_left_out=max(0, len(rows) - MAX_PROCESS_ROWS),
        hits_total=sum(int(race.get("hits_total") or 0) for race in races),
    )
