"""Where a test runs (an xdist worker, or the only process): its part of the run's report.

``on_makereport`` puts the test's part on each of its reports as the attribute
``REPORT_ATTR`` (plain JSON values, which pytest-xdist serializes with the report, so that
``run_report`` gathers it wherever reports are logged). A failed phase also gets the text
timeline in its failure message, with ``--startup-guard-artifacts`` its folder of artifacts,
and in a pytest-html run the SVG timeline as an extra (``html_extras``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_startup_guard.report.record import RECORD_KEY, is_startup_test
from pytest_startup_guard.report.run_report import REPORT_ATTR, SCHEMA_VERSION, failure_line
from pytest_startup_guard.wording import printable

if TYPE_CHECKING:
    from pytest_startup_guard.report.record import StartupRecord
    from pytest_startup_guard.settings.session import GuardSession


def on_makereport(
    item: pytest.Item,
    report: pytest.TestReport,
    session: GuardSession,
    artifacts_root: Path | None,
) -> None:
    """Attach the test's part to ``report``; on a failure, add the timeline and artifacts."""
    from pytest_startup_guard.report.record import take_record
    from pytest_startup_guard.report.reruns import attempt_of

    record = item.stash.get(RECORD_KEY, None)
    if report.when == "teardown":
        take_record(item)  # the attempt is over; a rerun starts a new record
    if not is_startup_test(item):
        return
    attempt = attempt_of(item)
    part: dict[str, Any] = {"v": SCHEMA_VERSION, "attempt": attempt}
    if report.failed:  # it may quote a server's output: a str that JSON and terminals take
        part["failure"] = printable(failure_line(report))
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
    """Add the record's facts and artifacts to ``part``: on a failure, and once at teardown."""
    from pytest_startup_guard.report.record import snapshot

    if report.failed:
        _on_failure(item, report, session, artifacts_root, record, part["attempt"])
    if report.failed or report.when == "teardown":
        part["facts"] = snapshot(record)
    if report.failed:
        from pytest_startup_guard.report.html_extras import add_extras, wanted

        if wanted(item.config):
            add_extras(report, part["facts"], session.replay(item.nodeid))
    if record.artifacts is not None:
        part["artifacts"] = record.artifacts
        if report.when == "teardown":
            from pytest_startup_guard.report.artifacts import finish

            finish(Path(record.artifacts), record)


def _on_failure(
    item: pytest.Item,
    report: pytest.TestReport,
    session: GuardSession,
    artifacts_root: Path | None,
    record: StartupRecord,
    attempt: int,
) -> None:
    """Put the timeline in the failure message; write the artifacts of the attempt's first
    failure. Both from the attempt's facts as they are now, nothing cut."""
    from pytest_startup_guard.report.record import snapshot
    from pytest_startup_guard.report.timeline import timeline_of

    failure_text = report.longreprtext
    facts = snapshot(record, limit=None)
    timeline = timeline_of(facts)
    if timeline is not None:
        add_to_failure(report, "startup-guard timeline", timeline)
    if artifacts_root is not None and record.artifacts is None:
        from pytest_startup_guard.report.artifacts import write_failure

        captured = "".join(f"\n--- {name} ---\n{text}" for name, text in report.sections)
        folder = write_failure(
            artifacts_root,
            item.nodeid,
            attempt,
            report.when,
            record,
            failure=failure_text + captured,
            replay=session.replay(item.nodeid),
            timeline=timeline,
            facts=facts,
        )
        record.artifacts = str(folder)


def add_to_failure(report: pytest.TestReport, title: str, text: str) -> None:
    """A section of the failure message (and of its JUnit XML ``<failure>`` text)."""
    addsection = getattr(report.longrepr, "addsection", None)
    if addsection is not None:
        addsection(title, text)
    else:
        report.sections.append((title, text))
