"""A text timeline of a start-up test, for failure messages and plain CI logs.

One row per race (its windows) and one per process (fleet members, their Python descendants,
the test process when it touched the cache), time running left to right, 100 columns in all
with the labels. Every process of a test reads the same monotonic clock, so their events line
up. ASCII only: a CI log shows it as written.

::

    timeline: 0 = release of the fleet; one column = 0.00485 s
                            -0.01 s            0.08 s             0.18 s            0.26 s        0.36 s
                            +------------------+------------------+-----------------+------------------+
    race pointer_swap      |                                                    ########################
    server 0 pid 5707      |------------------------------------------------------*--------------X
    server 1 pid 5709      | ---------------------------------------------------*--------------X
    legend: o open  l listdir/scandir  * access in an open race window (a hit)  # window open  - running
            R ready  X exited  H hung at the time-out  U undecided (machine too slow)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_startup_guard.fleet.fleet import Fleet, Server
    from pytest_startup_guard.races.armed import ArmedRace
    from pytest_startup_guard.report.record import StartupRecord
    from pytest_startup_guard.runtime.controller import AccessEvent, ProcessRecord

WIDTH = 100
LABEL_WIDTH = 22
MAX_PROCESS_ROWS = 30
MAX_RACE_ROWS = 8

# Which mark wins when several fall into one column.
PRIORITY = {"R": 9, "X": 9, "H": 9, "*": 7, "o": 5, "l": 5, "#": 3, "-": 1, " ": -1}

LEGEND = (
    "legend: o open  l listdir/scandir  * access in an open race window (a hit)"
    "  # window open  - running  R ready  X exited  H hung at the time-out  U undecided (machine too slow)"
)


@dataclass
class Lane:
    """One row: a label, stretches of time filled with a character, and instant marks."""

    label: str
    spans: list[tuple[float, float, str]] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)

    def times(self) -> list[float]:
        """Every time the lane shows, for the extent of the axis."""
        return [t for span in self.spans for t in span[:2]] + [t for t, _ in self.marks]


def render(
    lanes: list[Lane], *, zero: float, title: str, width: int = WIDTH, notes: Sequence[str] = ()
) -> str:
    """The lanes drawn on one time axis; ``zero`` is the time labelled 0."""
    cells = width - LABEL_WIDTH - 2
    times = [t for lane in lanes for t in lane.times()] or [zero]
    start, end = min([*times, zero]), max([*times, zero])
    span = max(end - start, 1e-3)

    def column(t: float) -> int:
        return min(cells - 1, max(0, int((t - start) / span * (cells - 1) + 0.5)))

    lines = [f"{title}; one column = {span / (cells - 1):.3g} s"[:width]]
    lines.extend(_axis(start, span, zero, cells))
    for lane in lanes:
        row = [" "] * cells
        for begin, finish, char in lane.spans:
            for index in range(column(begin), column(finish) + 1):
                _put(row, index, char)
        for t, char in lane.marks:
            _put(row, column(t), char)
        lines.append(f"{lane.label[:LABEL_WIDTH]:<{LABEL_WIDTH}} |{''.join(row).rstrip()}")
    lines.extend(note[:width] for note in notes)
    lines.extend(_wrapped(LEGEND, width))
    return "\n".join(lines)


def _put(row: list[str], index: int, char: str) -> None:
    """Mark one cell, unless a mark that says more (``PRIORITY``) is there already."""
    if PRIORITY.get(char, 0) >= PRIORITY.get(row[index], 0):
        row[index] = char


def _axis(start: float, span: float, zero: float, cells: int) -> list[str]:
    """Tick labels above a ruler with ``+`` at each tick (five ticks, ends included)."""
    labels = [" "] * (cells + 8)
    ruler = ["-"] * cells
    ticks = [int(i * (cells - 1) / 4 + 0.5) for i in range(5)]  # as render's column()
    for number, index in enumerate(ticks):
        ruler[index] = "+"
        text = f"{start - zero + number / 4 * span:.2f} s"
        at = index if number < 4 else max(0, index - len(text) + 1)
        labels[at : at + len(text)] = list(text)
    pad = " " * (LABEL_WIDTH + 2)
    return [
        (pad + "".join(labels)).rstrip()[: LABEL_WIDTH + 2 + cells],
        pad + "".join(ruler),
    ]


def _wrapped(text: str, width: int) -> list[str]:
    """``text`` cut at its double spaces into lines of ``width``, continuations indented."""
    lines, line = [], ""
    for word in text.split("  "):
        candidate = f"{line}  {word}" if line else word
        if len(candidate) > width and line:
            lines.append(line)
            line = "        " + word
        else:
            line = candidate
    return [*lines, line]


# -- the lanes of a start-up test ----------------------------------------------------------------


@dataclass(frozen=True)
class _Activity:
    """What the processes of one attempt did, by pid: the material of their lanes."""

    marks: dict[int, list[tuple[float, str]]]  # each access of the cache as a mark
    started: dict[int, float]  # when the process said hello to the controller
    gone: dict[int, float]  # when its connection closed (it exited or exec'd)
    end: float  # the attempt's last event: a process still running is drawn up to it


def lanes_for(record: StartupRecord, now: float) -> tuple[list[Lane], float, str, list[str]]:
    """Lanes, the time labelled 0, a title and notes for one attempt of a test."""
    fleets = record.fleet_list()
    armed = record.armed()
    accesses = record.accesses()
    history = record.process_history()
    marks = _access_marks(accesses, armed)
    activity = _Activity(
        marks=marks,
        started={process.pid: process.hello_t for process in history},
        gone={process.pid: process.gone_t for process in history if process.gone_t is not None},
        end=_last_event(marks, armed, fleets, now),
    )
    shown: set[int] = set()  # one lane per process: a server's child is not a stray as well
    process_lanes = _fleet_lanes(fleets, history, activity, shown)
    process_lanes += _other_process_lanes(accesses, activity, shown)
    lanes = _race_lanes(armed, now) + process_lanes[:MAX_PROCESS_ROWS]
    notes = _overflow_notes(len(armed), len(process_lanes))
    zero, what = _zero(fleets, record)
    return lanes, zero, f"timeline: 0 = {what}", notes


def _access_marks(
    accesses: list[AccessEvent], armed: list[ArmedRace]
) -> dict[int, list[tuple[float, str]]]:
    """Each process's accesses as marks: ``*`` a hit, ``o`` an open, ``l`` a listing."""
    # A hit is recorded from its access, so the pid and the time of the access identify it.
    hits = {(hit.pid, hit.t) for race in armed for hit in race.hits}
    marks: dict[int, list[tuple[float, str]]] = {}
    for access in accesses:
        char = "*" if (access.pid, access.t) in hits else ("o" if access.op == "open" else "l")
        marks.setdefault(access.pid, []).append((access.t, char))
    return marks


def _last_event(
    marks: dict[int, list[tuple[float, str]]],
    armed: list[ArmedRace],
    fleets: list[Fleet],
    now: float,
) -> float:
    """The time of the last access, window closing or server milestone; ``now`` if none."""
    times = [t for process_marks in marks.values() for t, _ in process_marks]
    times += [window.closed_t or now for race in armed for window in race.windows]
    times += [t for fleet in fleets for t in _milestone_times(fleet)]
    return max(times) if times else now


def _milestone_times(fleet: Fleet) -> list[float]:
    """When each server of ``fleet`` became ready, exited or was found hung."""
    released = fleet.released_t
    if released is None:
        return []  # its servers' seconds count from the release: without one they place nowhere
    times: list[float] = []
    for server in fleet.servers:
        times += [
            released + seconds
            for seconds in (server.seconds_to_ready, server.seconds_to_exit)
            if seconds is not None
        ]
        if server.seconds_to_timeout is not None:
            times.append(released + server.seconds_to_timeout)
    return times


def _race_lanes(armed: list[ArmedRace], now: float) -> list[Lane]:
    """A lane per armed race (the first ``MAX_RACE_ROWS``), its open windows filled in."""
    return [
        Lane(
            f"race {race.name}",
            spans=[(window.opened_t, window.closed_t or now, "#") for window in race.windows],
        )
        for race in armed[:MAX_RACE_ROWS]
    ]


def _fleet_lanes(
    fleets: list[Fleet], history: list[ProcessRecord], activity: _Activity, shown: set[int]
) -> list[Lane]:
    """A lane per server, each followed by its children's; adds their pids to ``shown``."""
    lanes: list[Lane] = []
    for number, fleet in enumerate(fleets):
        for server in fleet.servers:
            # With several fleets, the fleet's number tells apart their servers of one index.
            prefix = (
                f"f{number + 1} s{server.index}" if len(fleets) > 1 else f"server {server.index}"
            )
            lanes.append(_server_lane(f"{prefix} pid {server.pid}", fleet, server, activity))
            shown.add(server.pid)
            lanes.extend(_child_lanes(server.member, history, activity, shown))
    return lanes


def _server_lane(label: str, fleet: Fleet, server: Server, activity: _Activity) -> Lane:
    """A server running from its hello (or the release) to its exit, with its milestones."""
    lane = Lane(label)
    released = fleet.released_t
    begin = activity.started.get(server.pid, released)
    finish = activity.end
    if released is not None:
        # X, R, H in this order: of equal priority, the later mark wins a shared column.
        if server.seconds_to_exit is not None:
            finish = released + server.seconds_to_exit
            lane.marks.append((finish, "X"))
        if server.seconds_to_ready is not None:
            lane.marks.append((released + server.seconds_to_ready, "R"))
        if server.seconds_to_timeout is not None:
            mark = "H" if server.state == "hung" else "U"
            lane.marks.append((released + server.seconds_to_timeout, mark))
    if begin is not None:
        lane.spans.append((begin, finish, "-"))
    lane.marks.extend(activity.marks.get(server.pid, []))
    return lane


def _child_lanes(
    member: str, history: list[ProcessRecord], activity: _Activity, shown: set[int]
) -> list[Lane]:
    """A lane per process of fleet member ``member`` not shown yet (the server's children)."""
    lanes: list[Lane] = []
    for child in history:
        if child.member != member or child.pid in shown:
            continue
        lane = Lane(f"  child pid {child.pid}")
        lane.spans.append((child.hello_t, activity.gone.get(child.pid, activity.end), "-"))
        lane.marks.extend(activity.marks.get(child.pid, []))
        lanes.append(lane)
        shown.add(child.pid)
    return lanes


def _other_process_lanes(
    accesses: list[AccessEvent], activity: _Activity, shown: set[int]
) -> list[Lane]:
    """A lane per other process that touched the cache: the test process, or a stray."""
    from pytest_startup_guard.runtime.controller import TEST_PROCESS

    lanes: list[Lane] = []
    for pid, marks in sorted(activity.marks.items()):
        if pid in shown:
            continue
        member = next((access.member for access in accesses if access.pid == pid), None)
        label = f"test pid {pid}" if member == TEST_PROCESS else f"pid {pid}"
        lane = Lane(label, marks=list(marks))
        if pid in activity.started:
            lane.spans.append((activity.started[pid], activity.gone.get(pid, activity.end), "-"))
        lanes.append(lane)
    return lanes


def _overflow_notes(races: int, process_lanes: int) -> list[str]:
    """What did not fit: the rows past ``MAX_RACE_ROWS`` and ``MAX_PROCESS_ROWS``."""
    notes = []
    if races > MAX_RACE_ROWS:
        notes.append(f"... and {races - MAX_RACE_ROWS} more races (see the JSON report)")
    if process_lanes > MAX_PROCESS_ROWS:
        notes.append(
            f"... and {process_lanes - MAX_PROCESS_ROWS} more processes (see the artifacts)"
        )
    return notes


def _zero(fleets: list[Fleet], record: StartupRecord) -> tuple[float, str]:
    """The time labelled 0 and what happened then: the first release, else the set-up."""
    for fleet in fleets:
        if fleet.released_t is not None:
            what = "release of the fleet" if len(fleets) == 1 else "release of fleet 1"
            return fleet.released_t, what
    return record.origin, "set-up of the test's start-up fixtures"


def timeline_of(record: StartupRecord, now: float, width: int = WIDTH) -> str | None:
    """The timeline of one attempt, or None when nothing happened that it could show."""
    lanes, zero, title, notes = lanes_for(record, now)
    if not any(lane.spans or lane.marks for lane in lanes):
        return None
    return render(lanes, zero=zero, title=title, width=width, notes=notes)
