"""One view over a CI matrix: the JSON reports of several targets merged into one table.

``startup-guard-report merge`` (``cli``) reads the JSON report of each job of a matrix
(``--startup-guard-report``, one per target) and makes one table of them: one row per start-up
test (its node id), one column per target (the report's own ``target`` field: ``cpu``,
``cuda``, ``rocm`` in that order; a target the schema does not name is refused). A cell holds the
test's outcome on that target, its verdict in words, the failure a rerun hid, the failure
itself, and the time to ready (median and worst). Rows come in three groups: tests that fail
(or passed only on a rerun) on one target only while another target passed them, then the
other failing tests, then the rest; by node id within a group. A summary line per target gives
its totals.

Each report is read as a file that may come from anywhere (``read_json``: a regular file,
bounded, strict JSON) and checked whole against ``report-schema.json`` (``schema_check``)
before any field is read: a broken one is a ``MergeError`` naming the file and the field.
It reads the report only (``report-schema.json``), never the plugin's live objects, and
imports the standard library only: the console script starts without pytest. A report may
come from anywhere: every text of it is written ``printable`` (no control character reaches
the terminal or the page), then escaped for markdown or HTML. The schema name
and version it reads are the schema file's (the same as ``run_report.SCHEMA`` and
``SCHEMA_VERSION``, which a test checks; ``run_report`` imports pytest).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pytest_startup_guard.errors import UnreadableFileError
from pytest_startup_guard.report.read_json import read_json
from pytest_startup_guard.report.schema_check import first_problem, json_type, shown
from pytest_startup_guard.report.svg import escape
from pytest_startup_guard.report.words import (
    OUTCOMES,
    VERDICT_WORDS,
    count,
    outcome_counts,
    ready_words,
    verdict_words,
)
from pytest_startup_guard.wording import printable

# The report's own description; shipped in the package, next to the report modules' parent.
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "report-schema.json"
TARGET_ORDER = ("cpu", "cuda", "rocm")
TITLE = "startup guard: the CI matrix"
PASSING = ("passed", "xfailed", "xpassed")  # a test that ran and did not fail
FAILING = ("failed", "error")
MARKDOWN_FAILURE_CHARS = 200  # a failure message in a markdown cell is cut to this
__all__ = [
    "VERDICT_WORDS",
    "merge",
    "ready_words",
    "render_html",
    "render_markdown",
    "verdict_words",
]


def _cut(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


@cache
def _schema() -> dict[str, Any]:
    """report-schema.json, read once."""
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


def _schema_constants() -> tuple[str, int]:
    """The ``schema`` name and the ``version`` that report-schema.json describes."""
    properties = _schema()["properties"]
    return str(properties["schema"]["const"]), int(properties["version"]["const"])


SCHEMA, READS_VERSION = _schema_constants()


class MergeError(Exception):
    """A report that cannot be merged, or nothing to merge: the message says which and why."""


@dataclass(frozen=True)
class Report:
    """One target's JSON report, as read from its file."""

    path: Path
    document: dict[str, Any]

    @property
    def target(self) -> str:
        """The report's own target."""
        return str(self.document["target"])

    @property
    def tests(self) -> dict[str, dict[str, Any]]:
        """The report's tests, by node id."""
        return {str(test["nodeid"]): test for test in self.document["tests"]}


@dataclass(frozen=True)
class Cell:
    """One test on one target; ``test`` is None where that target's report does not hold it."""

    nodeid: str
    target: str
    test: dict[str, Any] | None

    @property
    def hidden(self) -> bool:
        """The test passed only on a rerun, which hid a failure."""
        return self.test is not None and self.test.get("hidden_failure") is not None

    @property
    def failed(self) -> bool:
        """Failed (or errored) on its last attempt, or passed only on a rerun."""
        return self.test is not None and (self.test.get("outcome") in FAILING or self.hidden)

    @property
    def passed(self) -> bool:
        """Ran, and did not fail: not skipped, not missing, no failure hidden by a rerun."""
        return self.test is not None and self.test.get("outcome") in PASSING and not self.hidden

    @property
    def state(self) -> str:
        """``missing``, ``hidden`` (passed on a rerun), or the last attempt's outcome."""
        if self.test is None:
            return "missing"
        if self.hidden:
            return "hidden"
        return str(self.test.get("outcome"))

    def headline(self) -> str:
        """The outcome in words: ``failed``, ``passed on rerun 1``, ``not in the report``."""
        if self.test is None:
            return "not in the report"
        if self.hidden:
            return f"passed on rerun {self.test.get('reruns', 0)}"
        outcome = str(self.test.get("outcome"))
        reruns = int(self.test.get("reruns") or 0)
        if outcome in FAILING and reruns:
            return f"{outcome} on all {reruns + 1} attempts"
        return outcome

    def details(self) -> list[str]:
        """The rest of the cell, a line each: what a rerun hid, the failure, verdict, readiness."""
        if self.test is None:
            return []
        lines = []
        hidden = self.test.get("hidden_failure")
        if hidden:
            where = "" if hidden.get("phase") == "call" else f" in {hidden.get('phase')}"
            lines.append(f"failed first{where}: {hidden.get('failure')}")
        elif self.test.get("outcome") in FAILING:
            attempts = self.test.get("attempts") or []
            failure = attempts[-1].get("failure") if attempts else None
            if failure:
                lines.append(str(failure))
        lines.append(verdict_words(self.test.get("verdict")))
        lines.append(ready_words(self.test.get("time_to_ready")))
        return [line for line in lines if line]


@dataclass
class Row:
    """One test over every target."""

    nodeid: str
    cells: list[Cell]

    @property
    def failed_on(self) -> list[str]:
        """The targets where it failed or a rerun hid a failure."""
        return [cell.target for cell in self.cells if cell.failed]

    @property
    def one_target_only(self) -> bool:
        """Fails on exactly one target, and passed on another: a target-specific failure."""
        return len(self.failed_on) == 1 and any(cell.passed for cell in self.cells)

    @property
    def group(self) -> int:
        """0: fails on one target only; 1: fails elsewhere too (or nowhere passed); 2: the rest."""
        if self.one_target_only:
            return 0
        return 1 if self.failed_on else 2

    def label(self) -> str:
        """Where it fails, in words; "" for a test that failed nowhere."""
        if self.one_target_only:
            return f"fails on {self.failed_on[0]} only"
        if self.failed_on:
            return "fails on " + ", ".join(self.failed_on)
        return ""


@dataclass
class Matrix:
    """The merged reports: targets in column order, rows in reading order."""

    reports: list[Report]
    missing: list[Path] = field(default_factory=list)

    @property
    def targets(self) -> list[str]:
        """The columns: cpu, cuda, rocm, then the others alphabetically."""
        return sorted((report.target for report in self.reports), key=target_key)

    def report(self, target: str) -> Report:
        """The report of one target."""
        return next(report for report in self.reports if report.target == target)

    def rows(self) -> list[Row]:
        """One row per node id: one-target failures first, then other failures, then the rest."""
        tests = [(target, self.report(target).tests) for target in self.targets]
        nodeids = {nodeid for _, by_id in tests for nodeid in by_id}
        rows = [
            Row(nodeid, [Cell(nodeid, target, by_id.get(nodeid)) for target, by_id in tests])
            for nodeid in nodeids
        ]
        return sorted(rows, key=lambda row: (row.group, row.nodeid))

    def summary_lines(self) -> list[tuple[str, str]]:
        """(target, its totals in one line) per column."""
        return [(target, totals_line(self.report(target))) for target in self.targets]

    def notes(self) -> list[str]:
        """What the table leaves out: the reports that were not there."""
        return [f"no report at {path}: its target is not in the table" for path in self.missing]


def target_key(target: str) -> tuple[int, str]:
    """cpu, cuda, rocm first, in that order; any other after them, alphabetically."""
    order = TARGET_ORDER.index(target) if target in TARGET_ORDER else len(TARGET_ORDER)
    return (order, target)


# -- reading ---------------------------------------------------------------------------------


def read_report(path: Path) -> Report:
    """Read one report; a file that is not a report of the version this module reads is an
    error naming the file and what is wrong with it: not a regular file, not strict JSON, too
    big or too deep (``read_json``), another schema or version, or a field that breaks the
    schema (``schema_check``: the field's JSON pointer, what it should be and what it is),
    checked whole before any field is read."""
    try:
        document = read_json(path)
    except UnreadableFileError as error:
        raise MergeError(str(error)) from None
    if not isinstance(document, dict):
        raise MergeError(
            f"{path} is not a {SCHEMA} file: it holds a JSON {json_type(document)}, not an object"
        )
    if document.get("schema") != SCHEMA:
        found = _cut(repr(document["schema"])) if "schema" in document else "missing"
        raise MergeError(f'{path} is not a {SCHEMA} file: its "schema" is {found}')
    version = document.get("version")
    if type(version) is not int or version != READS_VERSION:
        found = "no version" if version is None else f"version {shown(version)}"
        raise MergeError(
            f"{path} is a report of {found}; this startup-guard-report reads version"
            f" {READS_VERSION} only (merge reports written by the same pytest-startup-guard"
            " version as this one)"
        )
    problem = first_problem(document, _schema())
    if problem is not None:
        field_path, what = problem
        raise MergeError(
            f"{path} is not a valid version {READS_VERSION} report: field {field_path}: {what}"
        )
    return Report(path, document)


def merge(paths: list[Path]) -> Matrix:
    """Read the reports; a path that does not exist is left out (``Matrix.missing``: the
    caller warns); two reports of one target, or none at all, is an error."""
    reports: list[Report] = []
    missing: list[Path] = []
    for path in paths:
        if not path.exists():
            missing.append(path)
            continue
        report = read_report(path)
        same = next((other for other in reports if other.target == report.target), None)
        if same is not None:
            raise MergeError(
                f"{same.path} and {report.path} are both reports of target {report.target}:"
                " give one report per target"
            )
        reports.append(report)
    if not reports:
        raise MergeError(
            "no report to merge: "
            + ", ".join(str(path) for path in missing)
            + (" does not exist" if len(missing) == 1 else " do not exist")
        )
    return Matrix(reports, missing)


# -- words -----------------------------------------------------------------------------------


def totals_line(report: Report) -> str:
    """A target's totals: ``5 start-up tests: 3 passed, 2 failed; 1 passed only on a rerun;
    exit status 1 (report-cpu.json, seed 7)``."""
    totals = report.document.get("totals") or {}
    counts = outcome_counts(totals, OUTCOMES)
    tests = count(int(totals.get("tests", len(report.tests))), "start-up test")
    pieces = [tests + (f": {counts}" if counts else "")]
    hidden = int(totals.get("hidden_by_reruns") or 0)
    if hidden:
        pieces.append(f"{hidden} passed only on a rerun")
    where = report.path.name
    if "seed" in report.document:
        where += f", seed {report.document['seed']}"
    pieces.append(f"exit status {report.document.get('exit_status', '?')} ({where})")
    return "; ".join(pieces)


# -- markdown (a GitHub job summary) -----------------------------------------------------------

MARKS = {"failed": "❌", "error": "❌", "hidden": "⚠️", "passed": "✅", "missing": "⬜"}
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|~&#!])")
_NEWLINES = re.compile(r"\r\n|\r|\n")


def markdown_text(text: str) -> str:
    """Text as it reads, in a GitHub-flavoured markdown table cell: ``printable``, then
    punctuation that markdown or the table would read is escaped, newlines become ``<br>``."""
    return _NEWLINES.sub("<br>", _MARKDOWN_SPECIAL.sub(r"\\\1", printable(text)))


def markdown_code(text: str) -> str:
    """Text as a code span in a table cell (node ids): pipes escaped (GitHub reads ``\\|`` in a
    code span in a table as a pipe), newlines written as ``\\n``, a fence longer than any run of
    backticks in it."""
    text = _NEWLINES.sub(r"\\n", printable(text)).replace("|", r"\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _short(text: str) -> str:
    return (
        text if len(text) <= MARKDOWN_FAILURE_CHARS else text[: MARKDOWN_FAILURE_CHARS - 3] + "..."
    )


def render_markdown(matrix: Matrix) -> str:
    """The table in GitHub-flavoured markdown, for ``$GITHUB_STEP_SUMMARY``."""
    targets = matrix.targets
    lines = [f"### {markdown_text(TITLE)}", ""]
    lines += [
        f"- **{markdown_text(t)}**: {markdown_text(line)}" for t, line in matrix.summary_lines()
    ]
    lines += [f"- ⚠️ {markdown_text(note)}" for note in matrix.notes()]
    lines += [
        "",
        "| test | " + " | ".join(markdown_text(target) for target in targets) + " |",
        "|---" * (len(targets) + 1) + "|",
    ]
    for row in matrix.rows():
        test = markdown_code(row.nodeid)
        if row.label():
            test += f"<br>**{markdown_text(row.label())}**"
        cells = []
        for cell in row.cells:
            mark = MARKS.get(cell.state)
            head = markdown_text(cell.headline())
            parts = [f"{mark} {head}" if mark else head]
            parts += [markdown_text(_short(line)) for line in cell.details()]
            cells.append("<br>".join(parts))
        lines.append(f"| {test} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# -- HTML ------------------------------------------------------------------------------------

CELL_CLASSES = {
    "failed": "sg-failed",
    "error": "sg-failed sg-error",
    "passed": "sg-passed",
    "missing": "sg-missing",
}


def cell_class(cell: Cell) -> str:
    """``sg-failed`` (failed or error), ``sg-passed``, ``sg-missing`` (not in that target's
    report); any other state is ``sg-other`` and ``sg-`` the state: ``sg-hidden`` (passed on a
    rerun that hid a failure), ``sg-skipped``, ``sg-xfailed``, ``sg-xpassed``."""
    return CELL_CLASSES.get(cell.state, f"sg-other sg-{cell.state}")


def _attrs(**values: str) -> str:
    return "".join(
        f' {name.rstrip("_").replace("_", "-")}="{escape(value)}"' for name, value in values.items()
    )


def render_html_body(matrix: Matrix) -> str:
    """The table as HTML, for ``page``: every text escaped, no script, nothing external."""
    targets = matrix.targets
    parts = [f"<h1>{escape(TITLE)}</h1>", '<ul class="sg-summary">']
    parts += [
        f"<li{_attrs(data_target=target)}><strong>{escape(target)}</strong>: {escape(line)}</li>"
        for target, line in matrix.summary_lines()
    ]
    parts += [f'<li class="sg-note">{escape(note)}</li>' for note in matrix.notes()]
    parts += ["</ul>", '<table class="sg-table">', "<thead><tr><th>test</th>"]
    parts += [f"<th{_attrs(data_target=target)}>{escape(target)}</th>" for target in targets]
    parts += ["</tr></thead>", "<tbody>"]
    for row in matrix.rows():
        row_class = ' class="sg-only-one-target"' if row.one_target_only else ""
        parts.append(f"<tr{row_class}{_attrs(data_test=row.nodeid)}>")
        label = f'<div class="sg-label">{escape(row.label())}</div>' if row.label() else ""
        parts.append(
            f'<td class="sg-test"{_attrs(data_test=row.nodeid)}>'
            f"<code>{escape(row.nodeid)}</code>{label}</td>"
        )
        for cell in row.cells:
            attrs = _attrs(
                class_=cell_class(cell),
                data_test=cell.nodeid,
                data_target=cell.target,
                data_state=cell.state,
            )
            body = f'<div class="sg-outcome">{escape(cell.headline())}</div>' + "".join(
                f"<div>{escape(line)}</div>" for line in cell.details()
            )
            parts.append(f"<td{attrs}>{body}</td>")
        parts.append("</tr>")
    parts += ["</tbody>", "</table>"]
    return "\n".join(parts) + "\n"


def render_html(matrix: Matrix) -> str:
    """The whole page, in the report views' shared shell."""
    from pytest_startup_guard.report.html import page

    return page(f"{TITLE} ({', '.join(matrix.targets)})", render_html_body(matrix))
