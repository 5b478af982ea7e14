"""The terminal summary: the ``startup guard`` section at the end of the run.

Made where reports are logged, from what ``run_report.RunReport`` gathered: one total line,
one line per test at ``-v``, every failed start-up test in full, and every failure that a
rerun hid. Each line is written ``printable``: a failure message may quote what a server
printed, and nothing of it may act on the terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_startup_guard.report import words
from pytest_startup_guard.wording import printable

if TYPE_CHECKING:
    import pytest

    from pytest_startup_guard.report.run_report import ReportedTest, RunReport
    from pytest_startup_guard.settings.session import GuardSession

# A line of the section and its colour (None: the terminal's own).
Line = tuple[str, str | None]


def write_terminal_summary(
    terminalreporter: pytest.TerminalReporter, run: RunReport, session: GuardSession, strict: bool
) -> None:
    """Write the section; a run without start-up tests gets none."""
    if not run.tests:
        return
    verbose = terminalreporter.config.get_verbosity() > 0
    terminalreporter.write_sep("=", "startup guard")
    for line, colour in summary_lines(run, session, verbose=verbose, strict=strict):
        terminalreporter.write_line(printable(line), **({colour: True} if colour else {}))


def summary_lines(
    run: RunReport, session: GuardSession, *, verbose: bool, strict: bool
) -> list[Line]:
    """The ``startup guard`` section: (line, colour) pairs."""
    entries = list(run.tests.values())
    lines: list[Line] = [
        (
            f"target {session.target} ({session.target_reason}), seed {session.run_seed}"
            f" ({session.seed_source})",
            None,
        )
    ]
    failed = [e for e in entries if e.final.failed]
    hidden = run.hidden()
    lines.append((total_line(entries), "red" if failed else "yellow" if hidden else "green"))
    if verbose:
        lines.extend((one_line(e), None) for e in entries if not e.final.failed and e not in hidden)
    for entry in failed:
        lines.extend(
            (line, "red" if i == 0 else None)
            for i, line in enumerate(failure_lines(entry, session))
        )
    for entry in hidden:
        lines.extend(_hidden_failure_lines(entry, session))
    if hidden:
        lines.append(_strict_reruns_line(len(hidden), fails=run.strict_failed or strict))
    if run.written is not None:
        lines.append((f"JSON report: {run.written}", None))
    if run.html_written is not None:
        lines.append((f"HTML report: {run.html_written}", None))
    if run.write_error is not None:
        lines.append((f"could not write the report: {run.write_error}", "red"))
    return lines


def total_line(entries: list[ReportedTest]) -> str:
    """The run in one line: outcomes, races and their hits, explorations and their points'
    outcomes, readiness, absorbed, reruns."""
    import statistics

    outcomes = [entry.outcome for entry in entries]
    tally = {word: outcomes.count(word) for word in words.OUTCOMES}
    counts = words.outcome_counts(tally, words.OUTCOMES)
    races = [race for e in entries for race in e.facts.get("races", [])]
    explorations = [x for e in entries for x in e.facts.get("explorations", [])]
    servers = [s for e in entries for f in e.facts.get("fleets", []) for s in f["servers"]]
    ready = [s["seconds_to_ready"] for s in servers if s["seconds_to_ready"] is not None]
    pieces = [f"{words.count(len(entries), 'start-up test')}: {counts}"]
    if races:
        pieces.append(words.races_words(races))
    if explorations:
        pieces.append(words.explorations_words(explorations))
    if servers:
        text = f"{len(ready)} of {words.count(len(servers), 'server')} ready"
        if ready:
            median = words.seconds_text(statistics.median(ready))
            text += f" (median {median}, worst {words.seconds_text(max(ready))})"
        pieces.append(text)
    absorbed = sum(1 for s in servers if s["absorbed"])
    if absorbed:
        pieces.append(f"{absorbed} absorbed a race")
    if words.failed_workers_words(servers):
        pieces.append(words.failed_workers_words(servers))
    reruns = sum(e.reruns for e in entries)
    if reruns:
        pieces.append(words.count(reruns, "rerun"))
    return "; ".join(pieces)


def one_line(entry: ReportedTest) -> str:
    """One line per test (``-v``): outcome, races, explorations, readiness, absorbed, verdict."""
    facts = entry.facts
    pieces = [_races_text(facts.get("races", []))]
    pieces += [
        words.exploration_words(exploration) for exploration in facts.get("explorations", [])
    ]
    pieces.append(_ready_text(facts.get("time_to_ready")))
    absorbed = facts.get("absorbed", {}).get("servers", 0)
    if absorbed:
        pieces.append(f"{absorbed} absorbed a race")
    pieces.append(
        words.failed_workers_words(s for fleet in facts.get("fleets", []) for s in fleet["servers"])
    )
    pieces.append(_verdict_text(facts.get("verdict")))
    if entry.reruns:
        pieces.append(words.count(entry.reruns, "rerun"))
    details = "; ".join(piece for piece in pieces if piece)
    return f"{entry.outcome.upper()} {entry.nodeid}" + (f": {details}" if details else "")


def failure_lines(entry: ReportedTest, session: GuardSession) -> list[str]:
    """What a failed start-up test shows in the summary, whatever the verbosity."""

    facts = entry.facts
    final = entry.final
    lines = [f"{final.outcome.upper()} {entry.nodeid}"]
    lines.extend(_race_line(race) for race in facts.get("races", []))
    lines.extend(f"  {words.exploration_words(x)}" for x in facts.get("explorations", []))
    lines.extend(
        f"  corruption {corruption['kind']} of {corruption['filename']} of"
        f" {corruption['repo']}@{corruption['revision']}"
        for corruption in facts.get("corruptions", [])
    )
    for number, fleet in enumerate(facts.get("fleets", [])):
        lines += _fleet_lines(number, fleet)
    verdict = _verdict_text(facts.get("verdict"))
    if verdict:
        lines.append(f"  verdict: {verdict}")
    lines.append(f"  failure ({final.failure_phase}): {final.failure}")
    if entry.reruns:
        lines.append(f"  failed on every one of {entry.reruns + 1} attempts")
    if final.artifacts:
        lines.append(f"  artifacts: {final.artifacts}")
    lines.append(f"  replay: {session.replay(entry.nodeid)}")
    return lines


def _race_line(race: dict[str, Any]) -> str:
    """A race of a failed test: where, with which trigger, and which process hit it how often."""
    hits = ", ".join(
        f"{words.who(p['pid'], p['member'])} x{p['hits']}" for p in race["hits_per_process"]
    )
    return (
        f"  race {race['name']} on {race['target']}"
        f" with {race['trigger']}: {words.count(race['windows_total'], 'window')};"
        f" hits: {hits or 'none'}"
    )


def _fleet_lines(number: int, fleet: dict[str, Any]) -> list[str]:
    """A fleet of a failed test: its line, then a line per failure its states do not show (a
    worker that died, even under a server that answered its probe; a server that was ready and
    then exited)."""
    lines = [_fleet_line(number, fleet)]
    for server in fleet["servers"]:
        lines += [f"    server {server['index']}: {p}" for p in words.server_problems(server)]
    return lines


def _fleet_line(number: int, fleet: dict[str, Any]) -> str:
    """A fleet of a failed test: how many servers became ready, and what the others did."""
    servers = fleet["servers"]
    ready = [s["seconds_to_ready"] for s in servers if s["seconds_to_ready"] is not None]
    head = f"  fleet {number + 1}: {len(ready)} of {len(servers)} ready"
    if ready:
        median = words.seconds_text(sorted(ready)[len(ready) // 2])
        head += f" (median {median}, worst {words.seconds_text(max(ready))})"
    started = sum(1 for s in servers if s.get("started_up", s["ready"]))
    if started < len(ready):  # a worker died, or a member exited after it was ready
        head += f", {started} started up"
    troubles = [f"server {s['index']} {_server_state(s)}" for s in servers if not s["ready"]]
    return head + (": " + "; ".join(troubles) if troubles else "")


def _server_state(server: dict[str, Any]) -> str:
    """What a server that never became ready did instead."""
    state = server["state"]
    if state == "exited":
        after = words.seconds_text(server["seconds_to_exit"])
        return f"exited with code {server['returncode']} after {after}"
    if state == "hung":
        return "hung (not ready at the time-out)"
    if state == "undecided":
        return "undecided (the machine was too slow to decide)"
    if state == "rejected":
        return "came up wrong"
    return str(state)


def _hidden_failure_lines(entry: ReportedTest, session: GuardSession) -> list[Line]:
    """A test that passed on a rerun: the failure the rerun hid, its artifacts, its replay."""

    attempt = entry.hidden_failure
    assert attempt is not None
    lines: list[Line] = [
        (
            f"PASSED ON RERUN {entry.nodeid}: a rerun hid the failure of attempt"
            f" {attempt.number + 1} ({attempt.failure_phase}): {attempt.failure}",
            "yellow",
        )
    ]
    if attempt.artifacts:
        lines.append((f"  artifacts: {attempt.artifacts}", None))
    lines.append((f"  replay: {session.replay(entry.nodeid)}", None))
    return lines


def _strict_reruns_line(hidden: int, *, fails: bool) -> Line:
    """Whether the hidden failures fail the run, or how to make them fail it."""
    if fails:
        return (
            f"the run fails: {words.count(hidden, 'start-up test')} passed only on a"
            " rerun (--startup-guard-strict-reruns)",
            "red",
        )
    return ("(--startup-guard-strict-reruns makes a run like this one fail)", None)


def _races_text(races: list[dict[str, Any]]) -> str:
    """The races of a test, each with its windows and hits."""
    parts = []
    for race in races:
        processes = len(race["hits_per_process"])
        parts.append(
            f"{race['name']} ({words.count(race['windows_total'], 'window')},"
            f" {words.count(race['hits_total'], 'hit')} in"
            f" {words.count(processes, 'process', 'processes')})"
        )
    return ", ".join(parts)


def _ready_text(ttr: dict[str, Any] | None) -> str:
    """How many servers became ready, and how fast; "" for a test without a fleet."""
    return words.ready_words(ttr)


def _verdict_text(verdict: dict[str, Any] | None) -> str:
    """The start-up case's verdict in words; "" for a test without one."""
    if not verdict:
        return ""
    if not verdict["checked"]:
        return f"{verdict['case']}: never checked"
    done, missed = words.VERDICT_WORDS[verdict["kind"]]
    return f"{verdict['case']}: {done if verdict['passed'] else missed}"
