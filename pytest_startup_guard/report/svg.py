"""An SVG timeline of one start-up test, drawn from its entry in the JSON report.

``timeline_svg(test)`` takes one entry of the report's ``tests[]`` (or the same facts as
attached to a test's report: ``races``, ``fleets``, ``processes``) and returns an inline
``<svg>``, or None when there is nothing to draw (no race and no fleet). It is the picture of
the text timeline (``timeline.py``): both draw the rows, the time zero and the extent of
``rows.timeline_rows``: one row per race (its windows as bands) and one per process (each fleet
server, its Python descendants, then the other processes: the test process, strays), time left
to right, 0 at the release of the first fleet released. Of a process's accesses, the picture
shows the hits. Hover text comes from SVG ``<title>`` elements; there is no script. Colours are
presentation attributes, so the picture reads the same inside any page, and every mark also has
its own shape and letter.

Rows and marks drawn are capped (``MAX_RACE_ROWS``, ``MAX_PROCESS_ROWS``, ``MAX_WINDOWS``,
``MAX_HITS``): a line of the SVG says how many more were not drawn.

Stable hooks (a browser test relies on them):

- the root: ``svg.sg-timeline``, with ``data-zero`` (the time labelled 0, in the report's
  seconds from the set-up of the test's first start-up fixture);
- a row: ``g.sg-row`` with ``data-kind`` (``race``, ``server``, ``child``, ``process``),
  ``data-label`` (``race pointer_swap``, ``server 0``, ``fleet 2 server 0``, ``server 0
  child``, ``test``, ``pid 123``) and ``data-pid`` (process rows); its label is
  ``text.sg-label``; everything below is inside its row;
- a window of a race: ``rect.sg-window`` (``data-window``: its index, ``data-open``: ``1`` for
  a window still open at the end, ``data-windows``: how many windows it stands for: windows
  closer than ``MERGE_PX`` on the picture are drawn as one band);
- a running stretch: ``line.sg-run``;
- a mark: ``g.sg-mark`` plus its kind: ``sg-hit`` (``data-pid``, ``data-op``, ``data-path``,
  ``data-race`` of its first hit, ``data-count``: how many hits of its row within ``MERGE_PX``
  it stands for), ``sg-ready``, ``sg-exit``, ``sg-hang``, ``sg-undecided``; each has
  ``data-t`` (seconds on the axis) and a ``<title>``;
- the end of a worker (on its process row): ``g.sg-mark.sg-end`` plus ``sg-end-failed`` (it
  failed: a red square, F), ``sg-end-stopped`` (its fleet's stop ended it: grey, S) or
  ``sg-end-ended`` (any other end: E), with ``data-pid``, ``data-end`` (``failed``,
  ``stopped``, ``ended``), ``data-code`` (its exit code, negative for a signal; empty where no
  word came), ``text.sg-end-label`` (``code 3``, ``SIGKILL``, ``no word``) and a ``<title>`` with
  how and why it ended (its cause);
- the release of a fleet: ``g.sg-mark.sg-release`` (``data-fleet``: 1, 2, ...), a line across
  the rows, outside them;
- the axis ``g.sg-axis`` with ``g.sg-tick`` (``data-seconds``), the legend ``g.sg-legend``, and a
  ``text.sg-note`` per kind of thing not drawn (``data-what``: ``races``, ``processes``,
  ``windows``, ``hits``; ``data-count``), reading "N more hits not drawn ...".
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_startup_guard.report.rows import (
    MAX_PROCESS_ROWS,
    MAX_RACE_ROWS,
    WORKER_ENDS,
    Mark,
    ProcessRow,
    RaceRow,
    Timeline,
    timeline_rows,
)
from pytest_startup_guard.report.words import (
    count,
    seconds_text,
    who,
    worker_end,
    worker_end_mark,
)
from pytest_startup_guard.wording import printable

__all__ = ["MAX_PROCESS_ROWS", "MAX_RACE_ROWS", "escape", "timeline_svg"]

MAX_WINDOWS = 500
MAX_HITS = 500
MERGE_PX = 3.0  # windows or hits of one row closer than this on the picture are drawn as one

WIDTH = 960
PLOT_LEFT = 214  # the labels' column is to the left of it
PLOT_RIGHT = WIDTH - 16
LABEL_CHARS = 30
ROW_HEIGHT = 22
TOP = 52  # title and axis above the first row
LINE = 16  # a line of notes or legend
CHAR_WIDTH = 6.7  # of the 11 px monospace font, to lay the legend out
FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'Liberation Mono', monospace"

INK = "#1f2328"
MUTED = "#57606a"
RUN = "#8c959f"
HIT = "#0550ae"
READY = "#1a7f37"
EXIT = "#cf222e"
HANG = "#d97706"
UNDECIDED = "#6e7781"
RELEASE = "#24292f"
# Race bands, one colour per race row (none of them the hits' blue or a state's colour).
BANDS = ("#8250df", "#e85aad", "#1b9e9e", "#9a6700", "#bf3989", "#6639ba", "#0a7b83", "#7d4e00")

# The marks of a server's states: class, letter, colour, shape.
STATES = {
    "ready": ("sg-ready", "R", READY, "circle"),
    "exit": ("sg-exit", "X", EXIT, "square"),
    "hang": ("sg-hang", "H", HANG, "square"),
    "undecided": ("sg-undecided", "U", UNDECIDED, "circle"),
    # A worker's end (``rows.WORKER_ENDS``): a failure drawn as an exit is, the others muted.
    "worker-failed": ("sg-end sg-end-failed", "F", EXIT, "square"),
    "worker-stopped": ("sg-end sg-end-stopped", "S", UNDECIDED, "circle"),
    "worker-ended": ("sg-end sg-end-ended", "E", MUTED, "circle"),
}

LEGEND = (
    ("hit", "hit: an access in an open race window"),
    ("window", "race window open"),
    ("run", "running"),
    ("ready", "ready"),
    ("exit", "exited"),
    ("hang", "hung at the time-out"),
    ("undecided", "undecided (machine too slow)"),
    ("release", "release of the fleet"),
)
# Added to the legend of a timeline with a worker that ended.
WORKER_LEGEND = (
    ("worker-failed", "worker failed"),
    ("worker-ended", "worker ended"),
    ("worker-stopped", "worker stopped with its fleet"),
)


def escape(value: object) -> str:
    """``value`` as text safe in HTML and SVG, attributes included: ``printable`` first
    (control characters, such as the ANSI colours of a server's output, and bytes that are not
    UTF-8 shown as their escapes: ``\\x1b``, ``\\xff``), then its markup escaped."""
    return html.escape(printable(str(value)), quote=True)


# -- the rows ------------------------------------------------------------------------------------


@dataclass
class _Mark:
    t: float
    kind: str  # hit, ready, exit, hang, undecided
    tip: str
    data: dict[str, str] = field(default_factory=dict)


@dataclass
class _Band:
    begin: float
    end: float
    index: int
    still_open: bool
    tip: str
    zero: float = 0.0  # the time labelled 0, for the hover text of merged windows


@dataclass
class _Row:
    kind: str  # race, server, child, process
    label: str  # data-label
    text: str  # what the row's label shows
    tip: str
    pid: int | None = None
    colour: str = BANDS[0]
    bands: list[_Band] = field(default_factory=list)
    runs: list[tuple[float, float, str]] = field(default_factory=list)
    marks: list[_Mark] = field(default_factory=list)


@dataclass
class _Timeline:
    """The rows to draw and what did not fit, with the extent of time they cover."""

    rows: list[_Row]
    releases: list[tuple[int, float, str]]  # fleet number, time, hover text
    notes: list[tuple[str, int, str]]  # what, how many, the line
    start: float
    end: float
    zero: float
    what: str


def _build(timeline: Timeline) -> _Timeline:
    """The picture's rows: those of ``timeline``, with their hover texts; the windows and hits
    past ``MAX_WINDOWS`` and ``MAX_HITS`` left out, and said so."""
    zero = timeline.zero
    rows = [
        _server_row(row, zero) if row.kind == "server" else _process_row(row, zero)
        for row in timeline.rows
    ]
    notes = timeline.notes()
    race_rows, windows_drawn = _race_rows(timeline.races, zero)
    windows_total = sum(int(race.facts.get("windows_total") or 0) for race in timeline.races)
    if windows_total > windows_drawn:
        more = windows_total - windows_drawn
        notes.append(
            ("windows", more, f"{count(more, 'more window')} not drawn (see the artifacts)")
        )
    hits_drawn = _place_hits(timeline.rows, rows, zero)
    if timeline.hits_total > hits_drawn:
        more = timeline.hits_total - hits_drawn
        notes.append(("hits", more, f"{count(more, 'more hit')} not drawn (see the artifacts)"))
    releases = [
        (
            number,
            t,
            f"release of fleet {number} ({count(servers, 'server')})"
            f" at {seconds_text(t - zero, 3)}",
        )
        for number, t, servers in timeline.releases
    ]
    return _Timeline(
        rows=race_rows + rows,
        releases=releases,
        notes=notes,
        start=timeline.start,
        end=timeline.end,
        zero=zero,
        what=timeline.what,
    )


def _server_row(row: ProcessRow, zero: float) -> _Row:
    """A server: running from its hello (or the release) to its exit, with its milestones."""
    server = row.facts
    state = str(server.get("state", ""))
    reason = str(server.get("reason") or "")
    tip = f"{row.label}, pid {row.pid}: {state}" + (f" ({reason})" if reason else "")
    drawn = _Row("server", row.label, row.text, tip, row.pid)
    named = f"{row.label} (pid {row.pid})"
    for mark in row.marks:
        at = f"{seconds_text(mark.after, 3)} after the release, at {seconds_text(mark.t - zero, 3)}"
        if mark.kind == "exit":
            tip = f"exited: {named} with code {server.get('returncode')}, {at}"
        elif mark.kind == "ready":
            tip = f"ready: {named} {at}"
        elif mark.kind in ("hang", "undecided"):
            what = (
                "hung: not ready at the time-out"
                if mark.kind == "hang"
                else "undecided: machine too slow"
            )
            tip = f"{what}: {named} {at}" + (f"; {reason}" if reason else "")
        else:
            continue  # accesses: the hits are placed by _place_hits
        drawn.marks.append(_Mark(mark.t, mark.kind, tip))
    if row.run is not None:
        drawn.runs.append((*row.run, _running(named, *row.run, zero)))
    return drawn


def _running(named: str, begin: float, finish: float, zero: float) -> str:
    return (
        f"{named} running from {seconds_text(begin - zero, 3)} to {seconds_text(finish - zero, 3)}"
    )


def _process_row(row: ProcessRow, zero: float) -> _Row:
    """Another process: a server's descendant, the test process, a stray."""
    process = row.facts
    tip = who(row.pid, row.member)
    if process.get("ppid") is not None:
        tip += f", parent {process['ppid']}"
    if process.get("argv"):
        tip += ": " + " ".join(str(arg) for arg in process["argv"])
    drawn = _Row(row.kind, row.label, row.text, tip, row.pid)
    if row.run is not None:
        drawn.runs.append((*row.run, _running(who(row.pid, None), *row.run, zero)))
    drawn.marks += [_worker_end(mark, row, zero) for mark in row.marks if mark.kind in WORKER_ENDS]
    return drawn


def _worker_end(mark: Mark, row: ProcessRow, zero: float) -> _Mark:
    """The end of a worker: how (exit code, signal, no word), when, and why (its cause)."""
    worker = mark.facts
    ended = float(worker["ended"])
    named = f"{worker.get('role') or 'worker'} {who(row.pid, row.member)}"
    at = f"at {seconds_text(ended - zero, 3)} ({seconds_text(mark.after, 3)} after the release)"
    end = mark.kind.removeprefix("worker-")
    if end == "failed":
        tip = f"failed: {named} {worker_end(worker)} {at}"
    elif end == "stopped":
        tip = f"stopped: {named} {worker_end(worker)} when its fleet was stopped, {at}"
    else:
        tip = f"ended: {named} {worker_end(worker)} {at}"
        if not worker.get("startup_work"):
            tip += " (did no start-up work: not judged)"
    if worker_end(worker) == "ended without a word":
        tip += "; no exit status reached the plugin (killed by a signal?)"
    if worker.get("cause"):
        tip += f"; cause: {worker['cause']}"
    code = worker.get("exit_code")
    data = {
        "pid": str(row.pid),
        "end": end,
        "code": "" if code is None else str(code),
        "label": worker_end_mark(worker),
    }
    return _Mark(mark.t, mark.kind, tip, data)


def _race_rows(races: Sequence[RaceRow], zero: float) -> tuple[list[_Row], int]:
    """A row per race with its windows (the first ``MAX_WINDOWS`` in all), and how many."""
    rows: list[_Row] = []
    drawn = 0
    for race in races:
        name, target = race.name, str(race.facts.get("target", ""))
        tip = (
            f"race {name} on {target} with {race.facts.get('trigger', '?')}:"
            f" {count(int(race.facts.get('windows_total') or 0), 'window')},"
            f" {count(int(race.facts.get('hits_total') or 0), 'hit')}"
        )
        colour = BANDS[race.number % len(BANDS)]
        row = _Row("race", f"race {name}", f"race {name}", tip, colour=colour)
        for window in race.windows[: max(0, MAX_WINDOWS - drawn)]:
            until = (
                "the end (still open)" if window.still_open else seconds_text(window.end - zero, 3)
            )
            opener = ""
            if window.facts.get("opened_by") is not None:
                opener = ", opened by " + who(window.facts["opened_by"], window.facts.get("member"))
            row.bands.append(
                _Band(
                    window.opened,
                    window.end,
                    window.index,
                    window.still_open,
                    f"window {window.index} of race {name} on {target}: open from"
                    f" {seconds_text(window.opened - zero, 3)} to {until}"
                    f" ({seconds_text(window.end - window.opened, 3)}){opener}",
                    zero,
                )
            )
            drawn += 1
        rows.append(row)
    return rows, drawn


def _place_hits(rows: Sequence[ProcessRow], drawn: Sequence[_Row], zero: float) -> int:
    """Put the hits (the first ``MAX_HITS``, race by race) on their processes' rows; how many
    were placed."""
    every = [
        (mark, picture)
        for row, picture in zip(rows, drawn, strict=True)
        for mark in row.marks
        if mark.kind == "hit"
    ]
    hits = sorted(every, key=lambda pair: pair[0].order)[:MAX_HITS]
    for mark, picture in hits:
        hit = mark.facts
        op, path = str(hit.get("op", "?")), str(hit.get("path", "?"))
        picture.marks.append(
            _Mark(
                mark.t,
                "hit",
                f"hit: {who(hit.get('pid'), hit.get('member'))} {op} {path} at"
                f" {seconds_text(mark.t - zero, 3)}, in window {hit.get('window', '?')}"
                f" of race {mark.race}"
                + (f": it found {hit['found']}" if hit.get("found") else ""),
                {"pid": str(hit.get("pid")), "op": op, "path": path, "race": mark.race},
            )
        )
    return len(hits)


# -- drawing -------------------------------------------------------------------------------------


def timeline_svg(test: Mapping[str, Any]) -> str | None:
    """The start-up of one test (an entry of the JSON report's ``tests[]``) as an inline SVG,
    or None when there is nothing to draw: no race and no fleet."""
    rows = timeline_rows(test, every_access=False)  # of a process's accesses, it marks the hits
    if rows is None:
        return None
    timeline = _build(rows)
    span = max(timeline.end - timeline.start, 1e-3)

    def x(t: float) -> float:
        return PLOT_LEFT + (t - timeline.start) / span * (PLOT_RIGHT - PLOT_LEFT)

    rows_bottom = TOP + len(timeline.rows) * ROW_HEIGHT
    workers = any(mark.kind in WORKER_ENDS for row in timeline.rows for mark in row.marks)
    legend = _legend(
        rows_bottom + 10 + len(timeline.notes) * LINE, LEGEND + WORKER_LEGEND if workers else LEGEND
    )
    height = legend[1] + 8
    nodeid = test.get("nodeid")
    label = "start-up timeline" + (f" of {nodeid}" if nodeid else "")
    parts = [
        f'<svg class="sg-timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}"'
        f' height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="{FONT}"'
        f' font-size="11" data-zero="{timeline.zero:g}" aria-label="{escape(label)}">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text class="sg-title" x="4" y="14" fill="{INK}">timeline: 0 = {escape(timeline.what)};'
        " hover over a mark for its details</text>",
    ]
    # Stripes under every other row, then the axis and its grid, then the rows over them.
    parts += [
        f'<rect x="0" y="{TOP + number * ROW_HEIGHT}" width="{WIDTH}" height="{ROW_HEIGHT}"'
        ' fill="#f6f8fa"/>'
        for number in range(1, len(timeline.rows), 2)
    ]
    parts += _axis(timeline, x, rows_bottom)
    for number, row in enumerate(timeline.rows):
        parts += _row(row, TOP + number * ROW_HEIGHT, x, timeline.zero)
    for number, t, tip in timeline.releases:
        parts.append(
            f'<g class="sg-mark sg-release" data-fleet="{number}" data-t="{t - timeline.zero:g}">'
            f"<title>{escape(tip)}</title>"
            f'<line x1="{x(t):.1f}" y1="{TOP - 6}" x2="{x(t):.1f}" y2="{rows_bottom}"'
            f' stroke="{RELEASE}" stroke-width="1.5" stroke-dasharray="4 3"/></g>'
        )
    y = rows_bottom + 10
    for what, number, line in timeline.notes:
        y += LINE
        parts.append(
            f'<text class="sg-note" data-what="{what}" data-count="{number}" x="4" y="{y - 4}"'
            f' fill="{EXIT}">{escape(line)}</text>'
        )
    parts.append(legend[0])
    parts.append("</svg>")
    return "\n".join(parts)


def _axis(timeline: _Timeline, x: Callable[[float], float], rows_bottom: int) -> list[str]:
    """Ticks in seconds from the zero, with faint lines down across the rows."""
    low, high = timeline.start - timeline.zero, timeline.end - timeline.zero
    step = _nice_step(max(high - low, 1e-3) / 6)
    digits = max(0, -math.floor(math.log10(step) + 1e-9))
    parts = [
        '<g class="sg-axis">',
        f'<line x1="{PLOT_LEFT}" y1="{TOP - 6}" x2="{PLOT_RIGHT}" y2="{TOP - 6}" stroke="{MUTED}"/>',
    ]
    value = math.ceil(low / step - 1e-9) * step
    while value <= high + 1e-9:
        at = x(value + timeline.zero)
        text = seconds_text(value, digits)
        parts.append(
            f'<g class="sg-tick" data-seconds="{round(value, 9):g}">'
            f'<line x1="{at:.1f}" y1="{TOP - 10}" x2="{at:.1f}" y2="{TOP - 6}" stroke="{MUTED}"/>'
            f'<line x1="{at:.1f}" y1="{TOP - 6}" x2="{at:.1f}" y2="{rows_bottom}"'
            ' stroke="#d0d7de" stroke-width="0.5"/>'
            f'<text x="{at:.1f}" y="{TOP - 14}" text-anchor="middle" fill="{MUTED}">'
            f"{escape(text)}</text></g>"
        )
        value += step
    parts.append("</g>")
    return parts


def _nice_step(rough: float) -> float:
    """1, 2 or 5 times a power of ten, at least ``rough``."""
    power = 10 ** math.floor(math.log10(rough))
    for factor in (1, 2, 5, 10):
        if factor * power >= rough:
            return float(factor * power)
    return float(10 * power)


def _row(row: _Row, top: int, x: Callable[[float], float], zero: float) -> list[str]:
    """A row's group: its label, then its bands, running stretches and marks."""
    middle = top + ROW_HEIGHT / 2
    attributes = f'class="sg-row" data-kind="{row.kind}" data-label="{escape(row.label)}"'
    if row.pid is not None:
        attributes += f' data-pid="{row.pid}"'
    text = row.text if len(row.text) <= LABEL_CHARS else row.text[: LABEL_CHARS - 1] + "\u2026"
    parts = [
        f"<g {attributes}>",
        f'<text class="sg-label" x="4" y="{middle + 4:.1f}" fill="{INK}" xml:space="preserve">'
        f"<title>{escape(row.tip)}</title>{escape(text)}</text>",
    ]
    for band, windows in _merged_bands(row.bands, x):
        left, right = x(band.begin), x(band.end)
        parts.append(
            f'<rect class="sg-window" data-window="{band.index}" data-windows="{windows}"'
            f' data-open="{1 if band.still_open else 0}" x="{left:.1f}" y="{top + 3}"'
            f' width="{max(right - left, 2):.1f}" height="{ROW_HEIGHT - 6}" fill="{row.colour}"'
            f' fill-opacity="0.55" stroke="{row.colour}"><title>{escape(band.tip)}</title></rect>'
        )
    for begin, end, tip in row.runs:
        parts.append(
            f'<line class="sg-run" x1="{x(begin):.1f}" y1="{middle:.1f}" x2="{x(end):.1f}"'
            f' y2="{middle:.1f}" stroke="{RUN}" stroke-width="3"><title>{escape(tip)}</title>'
            "</line>"
        )
    # Hits under the state marks, which say more.
    hits = _merged_hits([mark for mark in row.marks if mark.kind == "hit"], x, zero)
    for mark in [*hits, *(mark for mark in row.marks if mark.kind != "hit")]:
        parts.append(_mark(mark, x(mark.t), middle, zero))
    parts.append("</g>")
    return parts


def _merged_bands(bands: list[_Band], x: Callable[[float], float]) -> list[tuple[_Band, int]]:
    """Windows closer than ``MERGE_PX`` on the picture drawn as one band (a chaos refresher
    opens thousands): ``(band, how many windows it stands for)``. The picture cannot show them
    apart, and a page of chaos tests would otherwise weigh megabytes."""
    merged: list[tuple[_Band, int]] = []
    for band in sorted(bands, key=lambda b: b.begin):
        if merged and x(band.begin) - x(merged[-1][0].end) < MERGE_PX:
            first, windows = merged[-1]
            end = max(first.end, band.end)
            tip = (
                f"{windows + 1} windows from {seconds_text(first.begin - first.zero, 3)} to"
                f" {seconds_text(end - first.zero, 3)}, closer than the picture can show apart"
            )
            merged[-1] = (
                _Band(first.begin, end, first.index, first.still_open or band.still_open, tip,
                      first.zero),
                windows + 1,
            )  # fmt: skip
        else:
            merged.append((band, 1))
    return merged


def _merged_hits(hits: list[_Mark], x: Callable[[float], float], zero: float) -> list[_Mark]:
    """Hits of one row that fall within ``MERGE_PX`` of each other drawn as one mark, which
    says how many it stands for (``data-count``) and keeps the first one's details."""
    merged: list[_Mark] = []
    counts: list[int] = []
    for hit in sorted(hits, key=lambda m: m.t):
        if merged and x(hit.t) - x(merged[-1].t) < MERGE_PX:
            counts[-1] += 1
            first = merged[-1]
            first.data["count"] = str(counts[-1])
            first.tip = (
                f"{counts[-1]} hits from {seconds_text(first.t - zero, 3)}"
                f" to {seconds_text(hit.t - zero, 3)};"
                f" the first: {first.data.get('first', first.tip)}"
            )
            continue
        mark = _Mark(hit.t, hit.kind, hit.tip, {**hit.data, "count": "1"})
        mark.data["first"] = hit.tip
        merged.append(mark)
        counts.append(1)
    for mark in merged:
        mark.data.pop("first", None)
    return merged


def _mark(mark: _Mark, cx: float, cy: float, zero: float) -> str:
    data = "".join(
        f' data-{key}="{escape(value)}"' for key, value in mark.data.items() if key != "label"
    )
    head = (
        f'<g class="sg-mark {"sg-hit" if mark.kind == "hit" else STATES[mark.kind][0]}"'
        f' data-t="{round(mark.t - zero, 6):g}"{data}><title>{escape(mark.tip)}</title>'
    )
    label = ""
    if mark.kind in WORKER_ENDS:  # what ended it, in a few characters, left of the badge and
        # above the running line
        colour = EXIT if mark.kind == "worker-failed" else MUTED
        label = (
            f'<text class="sg-end-label" x="{cx - 9:.1f}" y="{cy - 2.5:.1f}" text-anchor="end"'
            f' font-size="9.5" fill="{colour}" stroke="#ffffff" stroke-width="3"'
            f' paint-order="stroke">{escape(mark.data.get("label", ""))}</text>'
        )
    return head + label + _shape(mark.kind, cx, cy) + "</g>"


def _shape(kind: str, cx: float, cy: float) -> str:
    """The picture of a mark: a diamond for a hit, a lettered badge for a state."""
    if kind == "hit":
        r = 4.5
        return (
            f'<polygon points="{cx:.1f},{cy - r:.1f} {cx + r:.1f},{cy:.1f} {cx:.1f},{cy + r:.1f}'
            f' {cx - r:.1f},{cy:.1f}" fill="{HIT}" stroke="#ffffff" stroke-width="0.8"/>'
        )
    _, letter, colour, shape = STATES[kind]
    if shape == "circle":
        badge = f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="{colour}"/>'
    else:
        badge = (
            f'<rect x="{cx - 7:.1f}" y="{cy - 7:.1f}" width="14" height="14" rx="2"'
            f' fill="{colour}"/>'
        )
    return (
        badge + f'<text x="{cx:.1f}" y="{cy + 3.8:.1f}" text-anchor="middle" font-size="10.5"'
        f' font-weight="bold" fill="#ffffff">{letter}</text>'
    )


def _legend(top: int, entries: Sequence[tuple[str, str]] = LEGEND) -> tuple[str, int]:
    """The legend (``entries``) from ``top`` down, wrapped to the width; and where it ends."""
    parts = ['<g class="sg-legend">']
    x, y = 4.0, top + LINE - 4
    parts.append(f'<text x="{x}" y="{y}" fill="{MUTED}">legend:</text>')
    x += 8 * CHAR_WIDTH
    for kind, words in entries:
        width = 22 + len(words) * CHAR_WIDTH + 14
        if x + width > WIDTH - 4:
            x, y = 4.0 + 8 * CHAR_WIDTH, y + LINE
        cy = y - 4
        if kind == "hit" or kind in STATES:
            sample = _shape(kind, x + 8, cy)
        elif kind == "window":
            sample = (
                f'<rect x="{x:.1f}" y="{cy - 6:.1f}" width="16" height="12" fill="{BANDS[0]}"'
                ' fill-opacity="0.55"/>'
            )
        elif kind == "run":
            sample = (
                f'<line x1="{x:.1f}" y1="{cy:.1f}" x2="{x + 16:.1f}" y2="{cy:.1f}" stroke="{RUN}"'
                ' stroke-width="3"/>'
            )
        else:
            sample = (
                f'<line x1="{x + 8:.1f}" y1="{cy - 7:.1f}" x2="{x + 8:.1f}" y2="{cy + 7:.1f}"'
                f' stroke="{RELEASE}" stroke-width="1.5" stroke-dasharray="4 3"/>'
            )
        parts.append(sample)
        parts.append(f'<text x="{x + 22:.1f}" y="{y}" fill="{INK}">{escape(words)}</text>')
        x += width
    parts.append("</g>")
    return "\n".join(parts), y + 4
