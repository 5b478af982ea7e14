"""The HTML views of the JSON report: a self-contained page, and the report of one run.

``page(title, body_html)`` is the shell every HTML view shares: a doctype, ``meta charset``,
viewport, a Content-Security-Policy that allows nothing but the inline style, and one inline
``<style>``: no script, no external stylesheet, font or image, nothing fetched from the
network (a system font stack). Its CSS has classes for other views too (a merged CI matrix):
``table.sg-table``, cells ``td.sg-passed``, ``td.sg-failed`` (red), ``td.sg-missing``, and
``tr.sg-only-one-target`` (a highlighted row).

``report_html(document)`` renders the whole JSON report of one run (``report-schema.json``):
the header, the totals, a table of the start-up tests (failed ones first, each linked to its
section) and a section per test with its SVG timeline (``svg.timeline_svg``), verdict,
failures, races, explorations (every outcome of their points), corruptions, fleets and servers
(what failed beyond a server's state, ``ul.sg-worker-problems``: a worker that died, a server
that exited after it was ready; the output tail of those that did not start up) and its replay
command. ``anchor(nodeid)`` is the ``id``
of a test's section (``report.html#...``). The report is the source of truth: this reads its
plain dicts, nothing live, and says its facts with ``words``. Everything from the report is
escaped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_startup_guard.report import words
from pytest_startup_guard.report.rows import zero_of
from pytest_startup_guard.report.svg import escape, timeline_svg

CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body {
  margin: 0 auto; padding: 1rem 1.5rem 3rem; max-width: 1100px; color: #1f2328; background: #fff;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
    "Noto Sans", "Liberation Sans", sans-serif;
}
h1 { font-size: 1.5rem; margin: 0.5rem 0; }
h2 { font-size: 1.2rem; margin: 0; }
h3 { font-size: 1rem; margin: 1rem 0 0.4rem; }
code, pre, .sg-mono {
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
  font-size: 12.5px;
}
pre {
  background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 4px; padding: 0.5rem 0.75rem;
  overflow-x: auto; white-space: pre-wrap; word-break: break-word; margin: 0.3rem 0;
}
a { color: #0550ae; }
.sg-header p, .sg-totals { margin: 0.2rem 0; }
.sg-muted { color: #57606a; }
table.sg-table { border-collapse: collapse; margin: 0.5rem 0; width: 100%; }
table.sg-table th, table.sg-table td {
  border: 1px solid #d0d7de; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top;
}
table.sg-table th { background: #f6f8fa; font-weight: 600; }
table.sg-table td.sg-num { text-align: right; white-space: nowrap; }
td.sg-passed { background: #dafbe1; color: #116329; }
td.sg-failed { background: #d1242f; color: #fff; font-weight: 600; }
td.sg-failed a { color: #fff; }
td.sg-missing { background: #eaeef2; color: #57606a; font-style: italic; }
td.sg-other { background: #fff8c5; }
tr.sg-only-one-target > td { background: #fff1b8; }
tr.sg-only-one-target > td.sg-failed { background: #d1242f; }
tr.sg-only-one-target > td:first-child { border-left: 4px solid #bf8700; }
.sg-badge {
  display: inline-block; padding: 0 0.45rem; border-radius: 3px; font-size: 0.8rem;
  font-weight: 700; letter-spacing: 0.02em; vertical-align: 0.1em;
}
.sg-badge.sg-passed { background: #1a7f37; color: #fff; }
.sg-badge.sg-failed { background: #d1242f; color: #fff; }
.sg-badge.sg-other { background: #9a6700; color: #fff; }
section.sg-test {
  border: 1px solid #d0d7de; border-radius: 6px; padding: 0.75rem 1rem; margin: 1rem 0;
}
section.sg-test.sg-test-failed { border-color: #d1242f; border-left-width: 6px; }
section.sg-test.sg-test-hidden { border-color: #bf8700; border-left-width: 6px; }
.sg-failure { color: #82071e; }
.sg-figure { overflow-x: auto; margin: 0.5rem 0; }
svg.sg-timeline { max-width: 100%; height: auto; display: block; }
details > summary { cursor: pointer; }
.sg-back { font-size: 0.85rem; }
"""

# Allow the inline style and nothing else: no script, no fetch, no frame, even by mistake.
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def page(title: str, body_html: str) -> str:
    """A whole self-contained HTML document: ``body_html`` (already HTML) under ``title``."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n'
        '<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n"
        f"<style>{CSS}</style>\n"
        "</head>\n<body>\n"
        f"{body_html}\n"
        "</body>\n</html>\n"
    )


# -- the report of one run -----------------------------------------------------------------------

FAILED = ("failed", "error")
EXPECTED = words.EXPECTED_WORDS


def anchor(nodeid: str) -> str:
    """The ``id`` of a test's section: readable, and unique (a short hash of the node id)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", nodeid).strip("-")[:80]
    return f"test-{slug}-{hashlib.sha1(nodeid.encode(), usedforsecurity=False).hexdigest()[:8]}"


def report_html(document: Mapping[str, Any]) -> str:
    """The HTML report of one run, from its whole JSON report (``report-schema.json``)."""
    tests = list(document.get("tests") or [])
    ordered = sorted(tests, key=_rank)  # failed first, then what a rerun hid; else as run
    body = [
        '<header class="sg-header" id="top">',
        "<h1>pytest-startup-guard report</h1>",
        _run_facts(document),
        "</header>",
        '<section class="sg-summary">',
        '<h2 id="totals">Totals</h2>',
        f'<p class="sg-totals">{escape(_totals_text(document.get("totals") or {}, tests))}</p>',
        _tests_table(ordered),
        "</section>",
    ]
    body.extend(_test_section(test) for test in ordered)
    target = document.get("target", "?")
    status = document.get("exit_status", "?")
    return page(
        f"startup guard: {len(tests)} start-up tests, {target}, exit {status}", "\n".join(body)
    )


def _rank(test: Mapping[str, Any]) -> int:
    if test.get("outcome") in FAILED:
        return 0
    if test.get("hidden_failure"):
        return 1
    return 2


def _run_facts(document: Mapping[str, Any]) -> str:
    versions = document.get("versions") or {}
    installed = ", ".join(
        f"{name} {version}" for name, version in versions.items() if version is not None
    )
    missing = [name for name, version in versions.items() if version is None]
    status = document.get("exit_status")
    lines = [
        f"target <b>{escape(document.get('target', '?'))}</b>"
        f" ({escape(document.get('target_reason', ''))}); seed"
        f" <code>{escape(document.get('seed', '?'))}</code>"
        f" ({escape(document.get('seed_source', ''))}); exit status"
        f" <b>{escape(status)}</b>{' (the run failed)' if status not in (0, None) else ''}",
        f"versions: {escape(installed or '-')}"
        + (f"; not installed: {escape(', '.join(missing))}" if missing else ""),
        f"written {escape(document.get('created', '?'))}; xdist workers:"
        f" {escape(document.get('workers', 0))}; strict reruns:"
        f" {escape(_yes(document.get('strict_reruns')))}; reruns allowed:"
        f" {escape(_yes(document.get('allow_reruns')))}; report schema version"
        f" {escape(document.get('version', '?'))}",
    ]
    return "\n".join(
        f'<p class="{"" if i == 0 else "sg-muted"}">{line}</p>' for i, line in enumerate(lines)
    )


def _yes(value: object) -> str:
    return "yes" if value else "no"


def _totals_text(totals: Mapping[str, Any], tests: Sequence[Mapping[str, Any]]) -> str:
    counts = words.outcome_counts(totals, words.OUTCOMES)
    pieces = [
        f"{words.count(int(totals.get('tests', len(tests))), 'start-up test')}: {counts or 'none'}"
    ]
    races = [race for test in tests for race in test.get("races") or []]
    if races:
        pieces.append(words.races_words(races))
    explorations = [x for test in tests for x in test.get("explorations") or []]
    if explorations:
        pieces.append(words.explorations_words(explorations))
    servers = [s for t in tests for f in t.get("fleets") or [] for s in f.get("servers") or []]
    if servers:
        ready = sum(1 for s in servers if s.get("ready"))
        pieces.append(f"{ready} of {words.count(len(servers), 'server')} ready")
    if totals.get("absorbed_servers"):
        pieces.append(f"{totals['absorbed_servers']} absorbed a race")
    if words.failed_workers_words(servers):
        pieces.append(words.failed_workers_words(servers))
    if totals.get("hidden_by_reruns"):
        pieces.append(f"{totals['hidden_by_reruns']} failures hidden by reruns")
    return "; ".join(pieces)


def _outcome_class(test: Mapping[str, Any]) -> str:
    outcome = test.get("outcome")
    if outcome in FAILED:
        return "sg-failed"
    if outcome == "passed" and not test.get("hidden_failure"):
        return "sg-passed"
    return "sg-other"


def _tests_table(tests: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        '<table class="sg-table sg-tests">',
        "<thead><tr><th>test</th><th>outcome</th><th>verdict</th>"
        "<th>reruns / hidden failure</th><th>time to ready</th></tr></thead>",
        "<tbody>",
    ]
    for test in tests:
        nodeid = str(test.get("nodeid", "?"))
        outcome = str(test.get("outcome", "?"))
        rows.append(
            f'<tr class="sg-test-row" data-outcome="{escape(outcome)}">'
            f'<td><a href="#{anchor(nodeid)}"><code>{escape(nodeid)}</code></a></td>'
            f'<td class="{_outcome_class(test)}">{escape(outcome.upper())}</td>'
            f"<td>{escape(_verdict_words(test))}</td>"
            f"<td>{escape(_reruns_text(test))}</td>"
            f'<td class="sg-num">{escape(_ready_text(test.get("time_to_ready")))}</td></tr>'
        )
    if not tests:
        rows.append('<tr><td class="sg-missing" colspan="5">no start-up test ran</td></tr>')
    rows.append("</tbody></table>")
    return "\n".join(rows)


def _first_failure(test: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The phase and failure of the last attempt that failed (the final one, if it did)."""
    for attempt in reversed(test.get("attempts") or []):
        if attempt.get("failure"):
            return attempt.get("phase"), str(attempt["failure"])
    return None, None


def _verdict_words(test: Mapping[str, Any]) -> str:
    """The verdict in words: the start-up case's, else how the test and its fleets went."""
    verdict = test.get("verdict")
    if verdict:
        expected = str(verdict.get("expected", ""))
        done, missed = EXPECTED.get(expected, (expected, f"did not {expected}"))
        case = verdict.get("case", "?")
        if not verdict.get("checked"):
            return f"{case}: never checked (expected to {expected})"
        if verdict.get("passed"):
            return f"{case}: {done}, as expected"
        if verdict.get("undecided"):
            return f"{case}: undecided: the machine was too slow to decide"
        return f"{case}: {missed} (expected to {expected})"
    phase, failure = _first_failure(test)
    if test.get("outcome") in FAILED and failure:
        first = failure.strip().splitlines()[0] if failure.strip() else failure
        return f"failed in {phase or '?'}: {_cut(first, 160)}"
    ttr = test.get("time_to_ready")
    if ttr:
        return f"{ttr.get('ready', 0)} of {words.count(int(ttr.get('servers', 0)), 'server')} ready"
    return str(test.get("outcome", "-"))


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "\u2026"


def _reruns_text(test: Mapping[str, Any]) -> str:
    reruns = int(test.get("reruns") or 0)
    text = words.count(reruns, "rerun") if reruns else "-"
    hidden = test.get("hidden_failure")
    if hidden:
        failure = str(hidden.get("failure", "")).strip().splitlines() or [""]
        text += (
            f"; HIDDEN FAILURE of attempt {int(hidden.get('attempt', 0)) + 1}"
            f" ({hidden.get('phase', '?')}): {_cut(failure[0], 160)}"
        )
    return text


def _ready_text(ttr: Mapping[str, Any] | None) -> str:
    return words.ready_words(ttr) or "-"


# -- one test ------------------------------------------------------------------------------------


def _test_section(test: Mapping[str, Any]) -> str:
    nodeid = str(test.get("nodeid", "?"))
    outcome = str(test.get("outcome", "?"))
    kind = _outcome_class(test)
    classes = "sg-test" + (
        " sg-test-failed"
        if kind == "sg-failed"
        else " sg-test-hidden"
        if test.get("hidden_failure")
        else ""
    )
    parts = [
        f'<section class="{classes}" id="{anchor(nodeid)}" data-outcome="{escape(outcome)}">',
        f'<h2><span class="sg-badge {kind}">{escape(outcome.upper())}</span>'
        f" <code>{escape(nodeid)}</code></h2>",
        f'<p class="sg-muted">seed <code>{escape(test.get("seed", "?"))}</code>;'
        f" {escape(words.count(int(test.get('reruns') or 0), 'rerun'))};"
        f" duration {escape(words.seconds_text(test.get('duration')))}"
        + (f"; worker {escape(test['worker'])}" if test.get("worker") else "")
        + ' <a class="sg-back" href="#top">back to the table</a></p>',
        f"<p><b>verdict:</b> {escape(_verdict_words(test))}</p>",
    ]
    verdict = test.get("verdict")
    if verdict and verdict.get("message"):
        parts.append(f'<pre class="sg-verdict">{escape(verdict["message"])}</pre>')
    parts += _failures(test)
    parts.append("<h3>Timeline</h3>")
    svg = timeline_svg(test)
    if svg is None:
        parts.append(
            '<p class="sg-muted">no timeline: the test armed no race and launched no fleet</p>'
        )
    else:
        parts.append(f'<div class="sg-figure">{svg}</div>')
    parts += _races(test)
    parts += _corruptions(test)
    parts += _fleets(test)
    parts.append("<h3>Replay</h3>")
    parts.append(f'<pre class="sg-replay"><code>{escape(test.get("replay", ""))}</code></pre>')
    parts.append("</section>")
    return "\n".join(parts)


def _failures(test: Mapping[str, Any]) -> list[str]:
    """Every attempt that failed (with its artifacts folder), and what a rerun hid."""
    parts: list[str] = []
    for attempt in test.get("attempts") or []:
        if not attempt.get("failure") and not attempt.get("artifacts"):
            continue
        head = f"attempt {int(attempt.get('attempt', 0)) + 1}: {attempt.get('outcome', '?')}"
        if attempt.get("phase"):
            head += f" in {attempt['phase']}"
        parts.append(f"<p><b>{escape(head)}</b></p>")
        if attempt.get("failure"):
            parts.append(f'<pre class="sg-failure">{escape(attempt["failure"])}</pre>')
        if attempt.get("artifacts"):
            parts.append(f"<p>artifacts: <code>{escape(attempt['artifacts'])}</code></p>")
    hidden = test.get("hidden_failure")
    if hidden:
        parts.append(
            f"<p><b>a rerun hid the failure of attempt {int(hidden.get('attempt', 0)) + 1}"
            f" ({escape(hidden.get('phase', '?'))}):</b></p>"
            f'<pre class="sg-failure">{escape(hidden.get("failure", ""))}</pre>'
        )
    if parts:
        parts.insert(0, "<h3>Failures</h3>")
    return parts


def _races(test: Mapping[str, Any]) -> list[str]:
    races = list(test.get("races") or [])
    explorations = list(test.get("explorations") or [])
    if not races and not explorations:
        return []
    zero, what = zero_of(test)
    parts = [
        "<h3>Races</h3>",
        '<table class="sg-table sg-races"><thead><tr><th>race</th><th>target</th><th>trigger</th>'
        f"<th>windows (0 = {escape(what)})</th><th>hits per process</th></tr></thead><tbody>",
    ]
    for race in races:
        windows = list(race.get("windows") or [])
        spans = [
            f"{words.seconds_text(w.get('opened', 0) - zero)} to "
            + (
                words.seconds_text(w["closed"] - zero)
                if w.get("closed") is not None
                else "still open"
            )
            for w in windows[:5]
        ]
        total = int(race.get("windows_total", len(windows)))
        text = words.count(total, "window") + (": " + "; ".join(spans) if spans else "")
        if total > len(spans):
            text += f"; {total - len(spans)} more"
        hits = ", ".join(
            f"{words.who(p.get('pid'), p.get('member'))} x{p.get('hits', 0)}"
            for p in race.get("hits_per_process") or []
        )
        allowed = " (a miss allowed)" if race.get("allow_miss") else ""
        parts.append(
            f'<tr class="sg-race-row" data-race="{escape(race.get("name", ""))}">'
            f"<td><code>{escape(race.get('name', '?'))}</code></td>"
            f"<td>{escape(race.get('target', ''))}</td>"
            f"<td><code>{escape(race.get('trigger', ''))}</code>{escape(allowed)}</td>"
            f"<td>{escape(text)}</td>"
            f"<td>{escape(words.count(int(race.get('hits_total', 0)), 'hit'))}"
            f"{': ' + escape(hits) if hits else ''}</td></tr>"
        )
    parts.append("</tbody></table>")
    parts += [
        f'<p class="sg-exploration">{escape(words.exploration_words(exploration))}</p>'
        for exploration in explorations
    ]
    return parts


def _corruptions(test: Mapping[str, Any]) -> list[str]:
    corruptions = list(test.get("corruptions") or [])
    if not corruptions:
        return []
    items = "".join(
        f"<li><code>{escape(c.get('kind', '?'))}</code> of {escape(c.get('filename', '?'))} of"
        f" {escape(c.get('repo', '?'))}@{escape(c.get('revision', '?'))}"
        f" (<code>{escape(c.get('path', ''))}</code>)</li>"
        for c in corruptions
    )
    return ["<h3>Corruptions</h3>", f'<ul class="sg-corruptions">{items}</ul>']


def _fleets(test: Mapping[str, Any]) -> list[str]:
    fleets = list(test.get("fleets") or [])
    parts: list[str] = []
    failed = test.get("outcome") in FAILED or bool(test.get("hidden_failure"))
    for number, fleet in enumerate(fleets, 1):
        servers = list(fleet.get("servers") or [])
        ready = sum(1 for s in servers if s.get("ready"))
        parts.append(
            f"<h3>Fleet {number}: {ready} of"
            f" {escape(words.count(len(servers), 'server'))} ready</h3>"
        )
        parts.append(
            f"<p><code>{escape(fleet.get('command', ''))}</code><br>"
            '<span class="sg-muted">time-out'
            f" {escape(words.seconds_text(fleet.get('timeout'), 1))};"
            " seconds to ready and to exit count from the fleet's release</span></p>"
        )
        parts.append(
            '<table class="sg-table sg-servers"><thead><tr><th>server</th><th>pid</th>'
            "<th>port</th><th>state</th><th>to ready</th><th>to exit (code)</th>"
            "<th>hits</th><th>reason</th></tr></thead><tbody>"
        )
        parts += [_server_row(server) for server in servers]
        parts.append("</tbody></table>")
        problems = [
            f"server {server.get('index', '?')}: {problem}"
            for server in servers
            for problem in words.server_problems(server)
        ]
        if problems:
            items = "".join(f"<li>{escape(problem)}</li>" for problem in problems)
            parts.append(f'<ul class="sg-worker-problems sg-failure">{items}</ul>')
        for fault in fleet.get("port_faults") or []:
            parts.append(
                f"<p>port fault <code>{escape(fault.get('fault', '?'))}</code> on port"
                f" {escape(fault.get('port', '?'))}: {'met' if fault.get('met') else 'not met'},"
                f" {escape(words.count(int(fault.get('hits_total', 0)), 'hit'))}</p>"
            )
        for server in servers:
            tail = server.get("output_tail")
            if server.get("started_up", server.get("ready")) or not tail:
                continue
            parts.append(
                f'<details class="sg-output"{" open" if failed else ""}><summary>output of server'
                f" {escape(server.get('index', '?'))} (pid {escape(server.get('pid', '?'))}),"
                f" its last lines</summary><pre>{escape(tail)}</pre></details>"
            )
    return parts


def _server_row(server: Mapping[str, Any]) -> str:
    """One row of a fleet's table: a server's state (and its workers'), times, hits, reason."""
    state = str(server.get("state", "?"))
    exited = words.seconds_text(server.get("seconds_to_exit"))
    if server.get("returncode") is not None:
        exited += f" ({server['returncode']})"
    hung = server.get("seconds_to_timeout")
    if hung is not None:
        state += f" at {words.seconds_text(hung)}"
    started_up = bool(server.get("started_up", server.get("ready")))
    cell = "sg-passed" if started_up else "sg-failed"
    workers = list(server.get("workers") or [])
    failed_workers = sum(1 for worker in workers if worker.get("failed"))
    if failed_workers:
        state += f"; {failed_workers} of {words.count(len(workers), 'worker')} failed"
    elif server.get("died_after_ready") is not None:
        state += ", then exited"
    absorbed = " (absorbed)" if server.get("absorbed") else ""
    return (
        f'<tr class="sg-server-row" data-state="{escape(server.get("state", ""))}">'
        f"<td>{escape(server.get('index', '?'))}</td>"
        f"<td>{escape(server.get('pid', '?'))}</td>"
        f"<td>{escape(server.get('port') if server.get('port') is not None else '-')}</td>"
        f'<td class="{cell}">{escape(state)}</td>'
        '<td class="sg-num">'
        f"{escape(words.seconds_text(server.get('seconds_to_ready')))}</td>"
        f'<td class="sg-num">{escape(exited)}</td>'
        f'<td class="sg-num">{escape(server.get("hits", 0))}{escape(absorbed)}</td>'
        f"<td>{escape(server.get('reason') or '')}</td></tr>"
    )
