"""A text timeline of a start-up test, for failure messages and plain CI logs.

Drawn from the test's facts as the JSON report holds them (``record.snapshot``), with the rows,
the time zero and the extent of ``rows.timeline_rows``, which the SVG timeline (``svg``) draws
too: one row per race (its windows) and one per process (fleet members, their Python
descendants, then the test process and any other process under the plan), time running left to
right, 100 columns in all with the labels. Every process of a test reads the same monotonic
clock, so their events line up. ASCII only: a CI log shows it as written.

::

    timeline: 0 = release of the fleet; one column = 0.00485 s
                            -0.01 s            0.08 s             0.18 s            0.26 s        0.36 s
                            +------------------+------------------+-----------------+------------------+
    race pointer_swap      |                                                    ########################
    server 0 pid 5707      |------------------------------------------------------*--------------X
    server 1 pid 5709      | ---------------------------------------------------*--------------X
    legend: o open  l listdir/scandir  c rename/mkdir/remove/lock/...  * access in an open race window (a hit)  # window open  - running
            R ready  X exited  H hung at the time-out  U undecided (machine too slow)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_startup_guard.report.rows import WORKER_ENDS, ProcessRow, Timeline, timeline_rows
from pytest_startup_guard.report.words import seconds_text

WIDTH = 100
LABEL_WIDTH = 22

# Which mark wins when several fall into one column.
PRIORITY = {
    "R": 9, "X": 9, "H": 9, "U": 9, "F": 9, "E": 9, "S": 9,
    "*": 7, "o": 5, "l": 5, "c": 5, "#": 3, "-": 1, " ": -1,
}  # fmt: skip

LEGEND = (
    "legend: o open  l listdir/scandir  c rename/mkdir/remove/lock/...  * access in an open race"
    " window (a hit)"
    "  # window open  - running  R ready  X exited  H hung at the time-out  U undecided (machine too slow)"
)
# Added to the legend of a timeline with a worker that ended.
WORKER_LEGEND = "  F worker failed  E worker ended  S worker stopped with its fleet"


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
    lanes: list[Lane],
    *,
    zero: float,
    title: str,
    width: int = WIDTH,
    notes: Sequence[str] = (),
    extent: tuple[float, float] | None = None,
    legend: str = LEGEND,
) -> str:
    """The lanes drawn on one time axis; ``zero`` is the time labelled 0. The axis runs from
    ``extent``'s first time to its last, or over every time of the lanes (and zero)."""
    cells = width - LABEL_WIDTH - 2
    times = [t for lane in lanes for t in lane.times()] or [zero]
    start, end = extent or (min([*times, zero]), max([*times, zero]))
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
    lines.extend(_wrapped(legend, width))
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
        text = seconds_text(start - zero + number / 4 * span)
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

# A row's marks as characters (``rows.Mark.kind``).
CHARS = {
    "exit": "X",
    "ready": "R",
    "hang": "H",
    "undecided": "U",
    "hit": "*",
    "open": "o",
    "listing": "l",
    "change": "c",
    "worker-failed": "F",
    "worker-ended": "E",
    "worker-stopped": "S",
}


def lanes_of(timeline: Timeline) -> list[Lane]:
    """A lane per row of ``timeline``: the races' windows, the processes' runs and marks."""
    lanes = [
        Lane(f"race {race.name}", spans=[(w.opened, w.end, "#") for w in race.windows])
        for race in timeline.races
    ]
    for row in timeline.rows:
        lane = Lane(_label(row, several_fleets=timeline.fleets > 1))
        if row.run is not None:
            lane.spans.append((*row.run, "-"))
        lane.marks = [(mark.t, CHARS[mark.kind]) for mark in row.marks]
        lanes.append(lane)
    return lanes


def _label(row: ProcessRow, *, several_fleets: bool) -> str:
    """The row's label, short enough for the label column: ``f2 s0 pid 7`` with several fleets."""
    if row.kind == "server" and several_fleets:
        return f"f{row.fleet} s{row.facts.get('index', '?')} pid {row.pid}"
    return row.text


def timeline_of(test: Mapping[str, Any], width: int = WIDTH) -> str | None:
    """The timeline of one test (its entry of the JSON report, or the facts of an attempt:
    ``record.snapshot``), or None when nothing happened that it could show."""
    timeline = timeline_rows(test)
    lanes = [] if timeline is None else lanes_of(timeline)
    if timeline is None or not any(lane.spans or lane.marks for lane in lanes):
        return None
    workers = any(mark.kind in WORKER_ENDS for row in timeline.rows for mark in row.marks)
    return render(
        lanes,
        zero=timeline.zero,
        title=f"timeline: 0 = {timeline.what}",
        width=width,
        notes=[line for _, _, line in timeline.notes()],
        extent=(timeline.start, timeline.end),
        legend=LEGEND + WORKER_LEGEND if workers else LEGEND,
    )
