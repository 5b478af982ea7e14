"""The run's report, where reports are logged: what raced, what hit, what a rerun hid.

Where reports are logged (the xdist controller, or the only process), ``RunReport`` gathers
the part that ``attach`` put on each report of a start-up test, from
``pytest_runtest_logreport``, and groups the parts by test and attempt (reruns). It makes the
single JSON report, written atomically and described by ``report-schema.json`` (at the package
root, where users load it from); ``summary`` makes the terminal summary from it. Also resolves where the report and the
artifacts go.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_startup_guard.report import strict_json
from pytest_startup_guard.report.atomic import write_atomically
from pytest_startup_guard.report.words import OUTCOMES
from pytest_startup_guard.wording import printable

if TYPE_CHECKING:
    from pytest_startup_guard.settings.session import GuardSession

SCHEMA = "pytest-startup-guard-report"
SCHEMA_VERSION = 5
REPORT_ATTR = "startup_guard"  # the attribute carrying a test's part on its reports
# At the package root, where users load it: importlib.resources.files("pytest_startup_guard").
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "report-schema.json"

VERSIONED = ("pytest-rerunfailures", "pytest-xdist", "huggingface_hub", "transformers")


@dataclass(frozen=True)
class ReportPaths:
    """Where the JSON report and the artifacts go; None where they are not asked for."""

    report: str | None  # --startup-guard-report, absolute
    artifacts: str | None  # --startup-guard-artifacts, absolute
    html: str | None = None  # --startup-guard-html, absolute


REPORT_PATHS_KEY = pytest.StashKey[ReportPaths]()
RUN_REPORT_KEY = pytest.StashKey["RunReport"]()


class _ReportCollector:
    """Gathers the reports' parts; pytest_runtest_logreport is given no config, this holds it."""

    def __init__(self, run: RunReport) -> None:
        self.run = run

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Hand each logged report to the run."""
        self.run.collect(report)


def configure(config: pytest.Config, session: GuardSession) -> None:
    """Resolve the report and artifacts paths; where reports are logged (not on an xdist
    worker), start gathering the tests' parts."""

    def resolved(value: str | None) -> str | None:
        return None if value is None else str(resolve_path(value, config.invocation_params.dir))

    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None and "startup_guard_artifacts" in worker_input:
        artifacts = worker_input["startup_guard_artifacts"]  # the controller's, resolved there
    else:
        artifacts = resolved(session.artifacts_dir)
    config.stash[REPORT_PATHS_KEY] = ReportPaths(
        resolved(session.report_path), artifacts, resolved(session.html_path)
    )
    if worker_input is None:
        run = config.stash[RUN_REPORT_KEY] = RunReport()
        config.pluginmanager.register(_ReportCollector(run), "startup-guard-report")


def report_paths(config: pytest.Config) -> ReportPaths:
    """The paths ``configure`` resolved."""
    return config.stash[REPORT_PATHS_KEY]


def resolve_path(value: str, invocation_dir: Path) -> Path:
    """A relative path is relative to where pytest was started (in xdist workers too)."""
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else invocation_dir / path


def failure_line(report: pytest.TestReport) -> str:
    """The failure in one line: ``AssertionError: not every server became ready``."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()] or ["failed"]
    line = lines[0]
    if line.endswith(":") and len(lines) > 1:
        line = f"{line} {lines[1]}"
    line = printable(line)
    return line if len(line) <= 300 else line[:297] + "..."


# -- the tests, by attempt -----------------------------------------------------------------------


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
        """Whether a phase failed (or was rerun, which it only is after failing)."""
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
    """One start-up test of the run, with its attempts."""

    nodeid: str
    attempts: dict[int, Attempt] = field(default_factory=dict)
    worker: str | None = None

    @property
    def final(self) -> Attempt:
        """The last attempt: the one whose outcome pytest reports."""
        return self.attempts[max(self.attempts)]

    @property
    def outcome(self) -> str:
        """The final attempt's outcome."""
        return self.final.outcome

    @property
    def reruns(self) -> int:
        """How many times the test was run again."""
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
        """The facts of the latest attempt that carried any ({} when none did)."""
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
        self.html_written: Path | None = None
        self.write_error: str | None = None
        self.strict_failed = False

    def collect(self, report: pytest.TestReport) -> None:
        """Add one phase of one attempt; a report without a part is not a start-up test's."""
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
        """The tests that passed only on a rerun."""
        return [entry for entry in self.tests.values() if entry.hidden_failure is not None]

    # -- the JSON report ---------------------------------------------------------------------

    def document(self, session: GuardSession, exit_status: int) -> dict[str, Any]:
        """The JSON report, as ``report-schema.json`` describes it."""
        tests = [_test_document(entry, session) for entry in self.tests.values()]
        workers = {entry.worker for entry in self.tests.values() if entry.worker is not None}
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "target": session.target,
            "target_reason": session.target_reason,
            "seed": session.run_seed,
            "seed_source": session.seed_source,
            "versions": versions(),
            "workers": len(workers),
            "exit_status": int(exit_status),
            "strict_reruns": session.strict_reruns,
            "allow_reruns": session.allow_reruns,
            "totals": self._totals(tests),
            "tests": tests,
        }

    def _totals(self, tests: list[dict[str, Any]]) -> dict[str, int]:
        """Tests by outcome, those a rerun hid, and the servers that absorbed a race."""
        outcomes = [entry.outcome for entry in self.tests.values()]
        return {
            "tests": len(outcomes),
            **{word: outcomes.count(word) for word in OUTCOMES},
            "hidden_by_reruns": len(self.hidden()),
            "absorbed_servers": sum(test["absorbed"]["servers"] for test in tests),
        }

    def write(self, path: Path, document: dict[str, Any]) -> None:
        """Write atomically (``atomic``): a reader never sees half a report, and a symlink
        planted at a temporary name is never followed."""
        write_atomically(path, strict_json.dumps(document))
        self.written = path


def _test_document(entry: ReportedTest, session: GuardSession) -> dict[str, Any]:
    """One test of the JSON report: which, how it went, and what its last facts say."""

    return {
        "nodeid": entry.nodeid,
        "seed": session.seed_for(entry.nodeid),
        "replay": session.replay(entry.nodeid),
        "worker": entry.worker,
        "outcome": entry.outcome,
        "duration": round(entry.final.duration, 6),
        "reruns": entry.reruns,
        "attempts": [_attempt_document(entry.attempts[n]) for n in sorted(entry.attempts)],
        "hidden_failure": _hidden_failure_document(entry.hidden_failure),
        **_facts_document(entry.facts),
    }


def _attempt_document(attempt: Attempt) -> dict[str, Any]:
    """One attempt of a test: how it ended, and where its artifacts are."""
    return {
        "attempt": attempt.number,
        "outcome": attempt.outcome,
        "phase": attempt.failure_phase,
        "failure": attempt.failure,
        "artifacts": attempt.artifacts,
    }


def _hidden_failure_document(hidden: Attempt | None) -> dict[str, Any] | None:
    """The failure a rerun hid, or None."""
    if hidden is None:
        return None
    return {"attempt": hidden.number, "phase": hidden.failure_phase, "failure": hidden.failure}


def _facts_document(facts: dict[str, Any]) -> dict[str, Any]:
    """What the test did; a test that did none of it gets the schema's empty values."""
    return {
        "verdict": facts.get("verdict"),
        "races": facts.get("races", []),
        "explorations": facts.get("explorations", []),
        "corruptions": facts.get("corruptions", []),
        "fleets": facts.get("fleets", []),
        "time_to_ready": facts.get("time_to_ready"),
        "absorbed": facts.get("absorbed", {"servers": 0, "hits": 0}),
        "processes": facts.get("processes", []),
        "accesses_total": facts.get("accesses_total", 0),
        "accesses": facts.get("accesses", []),
    }


def write_report(
    run: RunReport,
    path: Path | None,
    session: pytest.Session,
    guard: GuardSession,
    html: Path | None = None,
) -> None:
    """Write the JSON report and the HTML report (a rendering of the same document); a report
    that cannot be written fails an otherwise green run."""
    document = run.document(guard, session.exitstatus)
    target = path
    try:
        if path is not None:
            run.write(path, document)
        if html is not None:
            from pytest_startup_guard.report.html import report_html

            target = html
            write_atomically(html, report_html(document))
            run.html_written = html
    except Exception as error:  # OSError, or a view that cannot render: said, never a crash
        why = str(error) if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
        run.write_error = f"{target}: {why}"
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def versions() -> dict[str, str | None]:
    """The plugin's and the libraries' versions (read from metadata: nothing is imported)."""
    from importlib import metadata

    from pytest_startup_guard._version import __version__

    found: dict[str, str | None] = {
        "pytest-startup-guard": __version__,
        "pytest": pytest.__version__,
        "python": platform.python_version(),
    }
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found
