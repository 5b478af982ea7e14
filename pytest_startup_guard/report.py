"""The session report: what raced, what hit, what a rerun hid, how fast start-up was.

Two sides, so that pytest-xdist needs nothing special:

- where a test runs (a worker, or the only process), ``on_makereport`` puts the test's part on
  each of its reports as the attribute ``startup_guard`` (plain JSON values, which pytest-xdist
  serializes with the report); a failed phase also gets the text timeline in its failure
  message and, with ``--startup-guard-artifacts``, its folder of artifacts;
- where reports are logged (the xdist controller, or the only process), ``RunReport`` gathers
  the parts from ``pytest_runtest_logreport``, groups them by test and attempt (reruns), and
  makes the terminal summary and the single JSON report, written atomically.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_startup_guard.record import RECORD_KEY, is_startup_test

if TYPE_CHECKING:
    from pytest_startup_guard.record import StartupRecord
    from pytest_startup_guard.session import GuardSession

SCHEMA = "pytest-startup-guard-report"
SCHEMA_VERSION = 1
REPORT_ATTR = "startup_guard"  # the attribute carrying a test's part on its reports
SCHEMA_FILE = Path(__file__).with_name("report-schema.json")

VERSIONED = ("pytest-rerunfailures", "pytest-xdist", "huggingface_hub", "transformers")


@dataclass(frozen=True)
class ReportPaths:
    report: str | None  # --startup-guard-report, absolute
    artifacts: str | None  # --startup-guard-artifacts, absolute


REPORT_PATHS_KEY = pytest.StashKey[ReportPaths]()
RUN_REPORT_KEY = pytest.StashKey["RunReport"]()


class _ReportCollector:
    """Gathers the reports' parts; pytest_runtest_logreport is given no config, this holds it."""

    def __init__(self, run: RunReport) -> None:
        self.run = run

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.run.collect(report)


def configure(config: pytest.Config, session: GuardSession) -> None:
    """Resolve the report and artifacts paths; where reports are logged (not on an xdist
    worker), start gathering the tests' parts."""

    def resolved(name: str) -> str | None:
        value = session.value(name)
        return (
            None if value is None else str(resolve_path(str(value), config.invocation_params.dir))
        )

    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None and "startup_guard_artifacts" in worker_input:
        artifacts = worker_input["startup_guard_artifacts"]  # the controller's, resolved there
    else:
        artifacts = resolved("artifacts")
    config.stash[REPORT_PATHS_KEY] = ReportPaths(resolved("report"), artifacts)
    if worker_input is None:
        run = config.stash[RUN_REPORT_KEY] = RunReport()
        config.pluginmanager.register(_ReportCollector(run), "startup-guard-report")


def report_paths(config: pytest.Config) -> ReportPaths:
    return config.stash[REPORT_PATHS_KEY]


# -- where the test runs ---------------------------------------------------------------------


def failure_line(report: pytest.TestReport) -> str:
    """The failure in one line: ``AssertionError: not every server became ready``."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()] or ["failed"]
    line = lines[0]
    if line.endswith(":") and len(lines) > 1:
        line = f"{line} {lines[1]}"
    return line if len(line) <= 300 else line[:297] + "..."


def add_to_failure(report: pytest.TestReport, title: str, text: str) -> None:
    """A section of the failure message (and of its JUnit XML ``<failure>`` text)."""
    addsection = getattr(report.longrepr, "addsection", None)
    if addsection is not None:
        addsection(title, text)
    else:
        report.sections.append((title, text))


def on_makereport(
    item: pytest.Item,
    report: pytest.TestReport,
    session: GuardSession,
    artifacts_root: Path | None,
) -> None:
    """Attach the test's part to ``report``; on a failure, add the timeline and artifacts."""
    from pytest_startup_guard.record import take_record
    from pytest_startup_guard.reruns import attempt_of

    record = item.stash.get(RECORD_KEY, None)
    if report.when == "teardown":
        take_record(item)  # the attempt is over; a rerun starts a new record
    if not is_startup_test(item):
        return
    attempt = attempt_of(item)
    part: dict[str, Any] = {"v": SCHEMA_VERSION, "attempt": attempt}
    if report.failed:
        part["failure"] = failure_line(report)
    setattr(report, REPORT_ATTR, part)
    if record is None:
        return
    try:
        _describe(item, report, session, artifacts_root, record, part)
    except Exception as error:  # a bug of the report must not hide the test's own outcome
        report.sections.append(
            (
                "startup-guard report",
                f"the report could not describe this test: {type(error).__name__}: {error}",
            )
        )


def _describe(
    item: pytest.Item,
    report: pytest.TestReport,
    session: GuardSession,
    artifacts_root: Path | None,
    record: StartupRecord,
    part: dict[str, Any],
) -> None:
    from pytest_startup_guard.record import snapshot

    if report.failed:
        _on_failure(item, report, session, artifacts_root, record, part["attempt"])
    if report.failed or report.when == "teardown":
        part["facts"] = snapshot(record)
    if record.artifacts is not None:
        part["artifacts"] = record.artifacts
        if report.when == "teardown":
            from pytest_startup_guard.artifacts import finish

            finish(Path(record.artifacts), record)


def _on_failure(
    item: pytest.Item,
    report: pytest.TestReport,
    session: GuardSession,
    artifacts_root: Path | None,
    record: StartupRecord,
    attempt: int,
) -> None:
    from pytest_startup_guard.seeds import replay_command
    from pytest_startup_guard.timeline import timeline_of

    failure_text = report.longreprtext
    timeline = timeline_of(record, time.monotonic())
    if timeline is not None:
        add_to_failure(report, "startup-guard timeline", timeline)
    if artifacts_root is not None and record.artifacts is None:
        from pytest_startup_guard.artifacts import write_failure

        captured = "".join(f"\n--- {name} ---\n{text}" for name, text in report.sections)
        folder = write_failure(
            artifacts_root,
            item.nodeid,
            attempt,
            report.when,
            record,
            failure=failure_text + captured,
            replay=replay_command(session.run_seed, item.nodeid),
            timeline=timeline,
        )
        record.artifacts = str(folder)


# -- where reports are logged ----------------------------------------------------------------


@dataclass
class Attempt:
    """One run of a test (the first, or a rerun)."""

    number: int
    phases: dict[str, str] = field(default_factory=dict)  # setup/call/teardown -> outcome
    failure: str | None = None
    failure_phase: str | None = None
    facts: dict[str, Any] | None = None
    duration: float = 0.0
    xfail: str | None = None  # "xfailed" or "xpassed"
    artifacts: str | None = None

    @property
    def failed(self) -> bool:
        return self.failure_phase is not None

    @property
    def outcome(self) -> str:
        """passed, failed, error (in set-up or teardown), skipped, xfailed or xpassed."""
        if self.failure_phase is not None:
            return "failed" if self.failure_phase == "call" else "error"
        if self.xfail is not None:
            return self.xfail
        if "skipped" in self.phases.values():
            return "skipped"
        return "passed"


@dataclass
class ReportedTest:
    nodeid: str
    attempts: dict[int, Attempt] = field(default_factory=dict)
    worker: str | None = None

    @property
    def final(self) -> Attempt:
        return self.attempts[max(self.attempts)]

    @property
    def outcome(self) -> str:
        return self.final.outcome

    @property
    def reruns(self) -> int:
        return len(self.attempts) - 1

    @property
    def hidden_failure(self) -> Attempt | None:
        """The first failed attempt of a test whose last attempt passed: what a rerun hid."""
        if self.final.failed or self.final.outcome == "skipped":
            return None
        earlier = [self.attempts[n] for n in sorted(self.attempts) if n != max(self.attempts)]
        return next((attempt for attempt in earlier if attempt.failed), None)

    @property
    def facts(self) -> dict[str, Any]:
        for number in sorted(self.attempts, reverse=True):
            if self.attempts[number].facts is not None:
                facts = self.attempts[number].facts
                assert facts is not None
                return facts
        return {}


class RunReport:
    """The start-up tests of a run, gathered from their reports."""

    def __init__(self) -> None:
        self.tests: dict[str, ReportedTest] = {}
        self.written: Path | None = None
        self.write_error: str | None = None
        self.strict_failed = False

    def collect(self, report: pytest.TestReport) -> None:
        part = getattr(report, REPORT_ATTR, None)
        if not isinstance(part, dict):
            return
        entry = self.tests.setdefault(report.nodeid, ReportedTest(report.nodeid))
        worker = getattr(report, "worker_id", None)
        if isinstance(worker, str):
            entry.worker = worker
        number = int(part.get("attempt", 0))
        attempt = entry.attempts.setdefault(number, Attempt(number))
        attempt.phases[report.when] = str(report.outcome)
        attempt.duration += float(getattr(report, "duration", 0.0) or 0.0)
        outcome: str = report.outcome  # pytest-rerunfailures adds "rerun"
        if (report.failed or outcome == "rerun") and attempt.failure_phase is None:
            attempt.failure_phase = report.when
            attempt.failure = part.get("failure") or failure_line(report)
        if report.when == "call" and hasattr(report, "wasxfail"):
            attempt.xfail = "xfailed" if report.skipped else "xpassed"
        if isinstance(part.get("facts"), dict):
            attempt.facts = part["facts"]
        if isinstance(part.get("artifacts"), str):
            attempt.artifacts = part["artifacts"]

    def hidden(self) -> list[ReportedTest]:
        return [entry for entry in self.tests.values() if entry.hidden_failure is not None]

    # -- the JSON report ---------------------------------------------------------------------

    def document(
        self, config: pytest.Config, session: GuardSession, exit_status: int
    ) -> dict[str, Any]:
        from pytest_startup_guard.seeds import replay_command

        tests = []
        for entry in self.tests.values():
            facts = entry.facts
            hidden = entry.hidden_failure
            tests.append(
                {
                    "nodeid": entry.nodeid,
                    "seed": session.seed_for(entry.nodeid),
                    "replay": replay_command(session.run_seed, entry.nodeid),
                    "worker": entry.worker,
                    "outcome": entry.outcome,
                    "duration": round(entry.final.duration, 6),
                    "reruns": entry.reruns,
                    "attempts": [
                        {
                            "attempt": attempt.number,
                            "outcome": attempt.outcome,
                            "phase": attempt.failure_phase,
                            "failure": attempt.failure,
                            "artifacts": attempt.artifacts,
                        }
                        for attempt in (entry.attempts[n] for n in sorted(entry.attempts))
                    ],
                    "hidden_failure": None
                    if hidden is None
                    else {
                        "attempt": hidden.number,
                        "phase": hidden.failure_phase,
                        "failure": hidden.failure,
                    },
                    "verdict": facts.get("verdict"),
                    "races": facts.get("races", []),
                    "explorations": facts.get("explorations", []),
                    "corruptions": facts.get("corruptions", []),
                    "fleets": facts.get("fleets", []),
                    "time_to_ready": facts.get("time_to_ready"),
                    "absorbed": facts.get("absorbed", {"servers": 0, "hits": 0}),
                    "processes": facts.get("processes", []),
                }
            )
        outcomes = [entry.outcome for entry in self.tests.values()]
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "target": session.target,
            "target_reason": session.target_reason,
            "seed": session.run_seed,
            "seed_source": session.seed_source,
            "versions": versions(),
            "workers": len({e.worker for e in self.tests.values() if e.worker is not None}),
            "exit_status": int(exit_status),
            "strict_reruns": bool(session.settings["strict_reruns"].value),
            "allow_reruns": bool(session.settings["allow_reruns"].value),
            "totals": {
                "tests": len(outcomes),
                **{word: outcomes.count(word) for word in OUTCOMES},
                "hidden_by_reruns": len(self.hidden()),
                "absorbed_servers": sum(t["absorbed"]["servers"] for t in tests),
            },
            "tests": tests,
        }

    def write(self, path: Path, document: dict[str, Any]) -> None:
        """Write atomically: a reader never sees half a report."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps(document, indent=2) + "\n")
            os.replace(temporary, path)
        finally:
            if temporary.exists():
                temporary.unlink()
        self.written = path


OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def resolve_path(value: str, invocation_dir: Path) -> Path:
    """A relative path is relative to where pytest was started (in xdist workers too)."""
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else invocation_dir / path


def write_report(run: RunReport, path: Path, session: pytest.Session, guard: GuardSession) -> None:
    """Write the JSON report; a report that cannot be written fails an otherwise green run."""
    try:
        run.write(path, run.document(session.config, guard, session.exitstatus))
    except OSError as error:
        run.write_error = f"{path}: {error}"
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def versions() -> dict[str, str | None]:
    """The plugin's and the libraries' versions (read from metadata: nothing is imported)."""
    from importlib import metadata

    import pytest_startup_guard

    found: dict[str, str | None] = {
        "pytest-startup-guard": pytest_startup_guard.__version__,
        "pytest": pytest.__version__,
        "python": platform.python_version(),
    }
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


# -- the terminal summary ----------------------------------------------------------------------


def _seconds(value: object) -> str:
    return f"{value:.2f} s" if isinstance(value, (int, float)) else "-"


def _ready_text(ttr: dict[str, Any] | None) -> str:
    if not ttr:
        return ""
    text = f"{ttr['ready']} of {ttr['servers']} ready"
    if ttr["ready"]:
        text += f" (median {_seconds(ttr['median'])}, worst {_seconds(ttr['worst'])})"
    return text


def _races_text(races: list[dict[str, Any]]) -> str:
    parts = []
    for race in races:
        processes = len(race["hits_per_process"])
        parts.append(
            f"{race['name']} ({_count(race['windows_total'], 'window')},"
            f" {_count(race['hits_total'], 'hit')} in {_count(processes, 'process', 'processes')})"
        )
    return ", ".join(parts)


def _count(number: int, word: str, plural: str | None = None) -> str:
    return f"{number} {word if number == 1 else (plural or word + 's')}"


def _verdict_text(verdict: dict[str, Any] | None) -> str:
    if not verdict:
        return ""
    if not verdict["checked"]:
        return f"{verdict['case']}: never checked"
    done = "survived" if verdict["kind"] == "transient" else "failed closed"
    missed = "did not survive" if verdict["kind"] == "transient" else "did not fail closed"
    return f"{verdict['case']}: {done if verdict['passed'] else missed}"


def one_line(entry: ReportedTest) -> str:
    """One line per test (``-v``): outcome, races, readiness, absorbed, verdict."""
    facts = entry.facts
    pieces = [_races_text(facts.get("races", [])), _ready_text(facts.get("time_to_ready"))]
    absorbed = facts.get("absorbed", {}).get("servers", 0)
    if absorbed:
        pieces.append(f"{absorbed} absorbed a race")
    pieces.append(_verdict_text(facts.get("verdict")))
    if entry.reruns:
        pieces.append(_count(entry.reruns, "rerun"))
    details = "; ".join(piece for piece in pieces if piece)
    return f"{entry.outcome.upper()} {entry.nodeid}" + (f": {details}" if details else "")


def failure_lines(entry: ReportedTest, session: GuardSession) -> list[str]:
    """What a failed start-up test shows in the summary, whatever the verbosity."""
    from pytest_startup_guard.seeds import replay_command

    facts = entry.facts
    final = entry.final
    lines = [f"{final.outcome.upper()} {entry.nodeid}"]
    for race in facts.get("races", []):
        hits = ", ".join(
            f"pid {p['pid']}" + (f" ({p['member']})" if p["member"] else "") + f" x{p['hits']}"
            for p in race["hits_per_process"]
        )
        lines.append(
            f"  race {race['name']} on {race['filename']} of {race['repo']}@{race['revision']}"
            f" with {race['trigger']}: {_count(race['windows_total'], 'window')};"
            f" hits: {hits or 'none'}"
        )
    for corruption in facts.get("corruptions", []):
        lines.append(
            f"  corruption {corruption['kind']} of {corruption['filename']} of"
            f" {corruption['repo']}@{corruption['revision']}"
        )
    for number, fleet in enumerate(facts.get("fleets", [])):
        servers = fleet["servers"]
        ready = [s["seconds_to_ready"] for s in servers if s["seconds_to_ready"] is not None]
        head = f"  fleet {number + 1}: {len(ready)} of {len(servers)} ready"
        if ready:
            head += f" (median {_seconds(sorted(ready)[len(ready) // 2])}, worst {_seconds(max(ready))})"
        troubles = [f"server {s['index']} {_server_state(s)}" for s in servers if not s["ready"]]
        lines.append(head + (": " + "; ".join(troubles) if troubles else ""))
    verdict = _verdict_text(facts.get("verdict"))
    if verdict:
        lines.append(f"  verdict: {verdict}")
    lines.append(f"  failure ({final.failure_phase}): {final.failure}")
    if entry.reruns:
        lines.append(f"  failed on every one of {entry.reruns + 1} attempts")
    if final.artifacts:
        lines.append(f"  artifacts: {final.artifacts}")
    lines.append(f"  replay: {replay_command(session.run_seed, entry.nodeid)}")
    return lines


def _server_state(server: dict[str, Any]) -> str:
    state = server["state"]
    if state == "exited":
        return (
            f"exited with code {server['returncode']} after {_seconds(server['seconds_to_exit'])}"
        )
    if state == "hung":
        return "hung (not ready at the time-out)"
    if state == "rejected":
        return "came up wrong"
    return str(state)


def summary_lines(
    run: RunReport, session: GuardSession, *, verbose: bool, strict: bool
) -> list[tuple[str, str | None]]:
    """The ``startup guard`` section: (line, colour) pairs."""
    from pytest_startup_guard.seeds import replay_command

    entries = list(run.tests.values())
    lines: list[tuple[str, str | None]] = [
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
        attempt = entry.hidden_failure
        assert attempt is not None
        lines.append(
            (
                f"PASSED ON RERUN {entry.nodeid}: a rerun hid the failure of attempt"
                f" {attempt.number + 1} ({attempt.failure_phase}): {attempt.failure}",
                "yellow",
            )
        )
        if attempt.artifacts:
            lines.append((f"  artifacts: {attempt.artifacts}", None))
        lines.append((f"  replay: {replay_command(session.run_seed, entry.nodeid)}", None))
    if hidden:
        if run.strict_failed or strict:
            lines.append(
                (
                    f"the run fails: {_count(len(hidden), 'start-up test')} passed only on a"
                    " rerun (--startup-guard-strict-reruns)",
                    "red",
                )
            )
        else:
            lines.append(("(--startup-guard-strict-reruns makes a run like this one fail)", None))
    if run.written is not None:
        lines.append((f"JSON report: {run.written}", None))
    if run.write_error is not None:
        lines.append((f"could not write the JSON report: {run.write_error}", "red"))
    return lines


def total_line(entries: list[ReportedTest]) -> str:
    import statistics

    outcomes = [entry.outcome for entry in entries]
    counts = ", ".join(f"{outcomes.count(word)} {word}" for word in OUTCOMES if word in outcomes)
    races = [race for e in entries for race in e.facts.get("races", [])]
    servers = [s for e in entries for f in e.facts.get("fleets", []) for s in f["servers"]]
    ready = [s["seconds_to_ready"] for s in servers if s["seconds_to_ready"] is not None]
    pieces = [f"{_count(len(entries), 'start-up test')}: {counts}"]
    if races:
        pieces.append(
            f"{_count(len(races), 'race')} armed,"
            f" {_count(sum(r['windows_total'] for r in races), 'window')},"
            f" {_count(sum(r['hits_total'] for r in races), 'hit')}"
        )
    if servers:
        text = f"{len(ready)} of {_count(len(servers), 'server')} ready"
        if ready:
            text += f" (median {_seconds(statistics.median(ready))}, worst {_seconds(max(ready))})"
        pieces.append(text)
    absorbed = sum(1 for s in servers if s["absorbed"])
    if absorbed:
        pieces.append(f"{absorbed} absorbed a race")
    reruns = sum(e.reruns for e in entries)
    if reruns:
        pieces.append(_count(reruns, "rerun"))
    return "; ".join(pieces)


def write_terminal_summary(
    terminalreporter: Any, run: RunReport, session: GuardSession, strict: bool
) -> None:
    if not run.tests:
        return
    verbose = terminalreporter.config.get_verbosity() > 0
    terminalreporter.write_sep("=", "startup guard")
    for line, colour in summary_lines(run, session, verbose=verbose, strict=strict):
        terminalreporter.write_line(line, **({colour: True} if colour else {}))
