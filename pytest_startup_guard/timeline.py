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
            R ready  X exited  H hung at the time-out
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_startup_guard.fleet import Fleet
    from pytest_startup_guard.record import StartupRecord

WIDTH = 100
LABEL_WIDTH = 22
MAX_PROCESS_ROWS = 30
MAX_RACE_ROWS = 8

# Which mark wins when several fall into one column.
PRIORITY = {"R": 9, "X": 9, "H": 9, "*": 7, "o": 5, "l": 5, "#": 3, "-": 1, " ": -1}

LEGEND = (
    "legend: o open  l listdir/scandir  * access in an open race window (a hit)"
    "  # window open  - running  R ready  X exited  H hung at the time-out"
)


@dataclass
class Lane:
    """One row: a label, stretches of time filled with a character, and instant marks."""

    label: str
    spans: list[tuple[float, float, str]] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)

    def times(self) -> list[float]:
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


def lanes_for(record: StartupRecord, now: float) -> tuple[list[Lane], float, str, list[str]]:
    """Lanes, the time labelled 0, a title and notes for one attempt of a test."""
    from pytest_startup_guard.controller import TEST_PROCESS

    fleets = record.fleet_list()
    armed = record.armed()
    accesses = record.accesses()
    history = record.process_history()
    hits = {(hit.pid, hit.t) for race in armed for hit in race.hits}
    by_pid: dict[int, list[tuple[float, str]]] = {}
    for access in accesses:
        char = "*" if (access.pid, access.t) in hits else ("o" if access.op == "open" else "l")
        by_pid.setdefault(access.pid, []).append((access.t, char))
    starts = {record.pid: record.hello_t for record in history}
    gone = {record.pid: record.gone_t for record in history if record.gone_t is not None}

    ends = [t for marks in by_pid.values() for t, _ in marks]
    ends += [w.closed_t or now for race in armed for w in race.windows]
    for fleet in fleets:
        if fleet.released_t is None:
            continue
        for server in fleet.servers:
            for seconds in (server.seconds_to_ready, server.seconds_to_exit):
                if seconds is not None:
                    ends.append(fleet.released_t + seconds)
            if server.state == "hung":
                ends.append(fleet.released_t + fleet.timeout)
    end = max(ends) if ends else now

    lanes: list[Lane] = []
    for race in armed[:MAX_RACE_ROWS]:
        lane = Lane(f"race {race.name}")
        lane.spans = [(w.opened_t, w.closed_t or now, "#") for w in race.windows]
        lanes.append(lane)

    shown: set[int] = set()
    process_lanes: list[Lane] = []
    for number, fleet in enumerate(fleets):
        released = fleet.released_t
        for server in fleet.servers:
            prefix = (
                f"f{number + 1} s{server.index}" if len(fleets) > 1 else f"server {server.index}"
            )
            lane = Lane(f"{prefix} pid {server.pid}")
            begin = starts.get(server.pid, released)
            finish = end
            if released is not None:
                if server.seconds_to_exit is not None:
                    finish = released + server.seconds_to_exit
                    lane.marks.append((finish, "X"))
                if server.seconds_to_ready is not None:
                    lane.marks.append((released + server.seconds_to_ready, "R"))
                if server.state == "hung":
                    lane.marks.append((released + fleet.timeout, "H"))
            if begin is not None:
                lane.spans.append((begin, finish, "-"))
            lane.marks.extend(by_pid.get(server.pid, []))
            process_lanes.append(lane)
            shown.add(server.pid)
            for child in history:
                if child.member != server.member or child.pid in shown:
                    continue
                child_lane = Lane(f"  child pid {child.pid}")
                child_lane.spans.append((child.hello_t, gone.get(child.pid, end), "-"))
                child_lane.marks.extend(by_pid.get(child.pid, []))
                process_lanes.append(child_lane)
                shown.add(child.pid)
    for pid, marks in sorted(by_pid.items()):
        if pid in shown:
            continue
        member = next((a.member for a in accesses if a.pid == pid), None)
        label = f"test pid {pid}" if member == TEST_PROCESS else f"pid {pid}"
        lane = Lane(label, marks=list(marks))
        if pid in starts:
            lane.spans.append((starts[pid], gone.get(pid, end), "-"))
        process_lanes.append(lane)
        shown.add(pid)

    notes = []
    if len(armed) > MAX_RACE_ROWS:
        notes.append(f"... and {len(armed) - MAX_RACE_ROWS} more races (see the JSON report)")
    if len(process_lanes) > MAX_PROCESS_ROWS:
        notes.append(
            f"... and {len(process_lanes) - MAX_PROCESS_ROWS} more processes (see the artifacts)"
        )
    lanes.extend(process_lanes[:MAX_PROCESS_ROWS])
    zero, what = _zero(fleets, record)
    return lanes, zero, f"timeline: 0 = {what}", notes


def _zero(fleets: list[Fleet], record: StartupRecord) -> tuple[float, str]:
    for fleet in fleets:
        if fleet.released_t is not None:
            return fleet.released_t, "release of the fleet" if len(fleets) == 1 else (
                "release of fleet 1"
            )
    return record.origin, "set-up of the test's start-up fixtures"


def timeline_of(record: StartupRecord, now: float, width: int = WIDTH) -> str | None:
    """The timeline of one attempt, or None when nothing happened that it could show."""
    lanes, zero, title, notes = lanes_for(record, now)
    if not any(lane.spans or lane.marks for lane in lanes):
        return None
    return render(lanes, zero=zero, title=title, width=width, notes=notes)
