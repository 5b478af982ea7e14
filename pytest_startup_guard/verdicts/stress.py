"""``--startup-guard-stress=N``: run each start-up test N times, with N derived seeds, and fail
it at the first round whose verdict differs from the first one's.

A test author runs this before a new race test lands in CI: a verdict that flips between seeds
(or with the load of the machine) is a flake in the making. Round 0 runs under the run seed, as
a run without stress would; round k under a run seed derived from it
(``settings.seeds.stress_run_seed``), so every round replays with a plain
``--startup-guard-seed``. A round that failed only because the machine was too slow to decide
(an *undecided* verdict) is counted, not compared: it is no verdict at all.

The rounds run in ``pytest_runtest_protocol`` (pytest-rerunfailures' way): each round is a full
set-up, call and teardown of the item; only the reports of the round that decides are logged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import pytest
from _pytest.reports import TestReport
from _pytest.runner import runtestprotocol

from pytest_startup_guard.outcomes import Failing
from pytest_startup_guard.settings.session import GuardSession

StressOutcome = Literal["passed", "skipped"] | Failing
"""A round's verdict: pytest's, where a failed round is ``failed`` or, as a start-up's
(``outcomes.Failing``), ``undecided``: it failed only because the machine was too slow to
decide."""


@dataclass(frozen=True)
class Round:
    index: int
    run_seed: int
    outcome: StressOutcome
    first_line: str
    reports: list[TestReport]


def _outcome(reports: list[TestReport], undecided: bool) -> tuple[StressOutcome, str]:
    """The round's verdict and the first line of what failed it."""
    for report in reports:
        if report.failed:
            text = report.longreprtext.strip()
            first = next(
                (line.strip() for line in text.splitlines() if line.strip().startswith("E ")),
                text.splitlines()[0] if text else "",
            )
            failing: Failing = "undecided" if undecided else "failed"
            return failing, first.removeprefix("E").strip()
    if any(report.skipped for report in reports):
        return "skipped", ""
    return "passed", ""


def run_rounds(
    item: pytest.Item,
    nextitem: pytest.Item | None,
    session: GuardSession,
    rounds: int,
    undecided: Callable[[pytest.Item], bool],
) -> None:
    """Run ``item`` up to ``rounds`` times and log the reports of the round that decides."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    done: list[Round] = []
    try:
        for index in range(rounds):
            session.stress_rounds[item.nodeid] = index
            # As pytest-rerunfailures does: each round tears down what ``nextitem`` does not
            # need, so the test's own fixtures are made anew for the next round.
            reports = runtestprotocol(item, nextitem=nextitem, log=False)
            outcome, first = _outcome(reports, undecided(item))
            done.append(Round(index, session.run_seed_for(item.nodeid), outcome, first, reports))
            reference = next((r for r in done if r.outcome != "undecided"), None)
            if reference is not None and outcome not in ("undecided", reference.outcome):
                _log(item, _flipped(item, reports, reference, done[-1], rounds))
                return
        _log(item, _annotated(done[-1].reports, done, rounds))
    finally:
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _log(item: pytest.Item, reports: list[TestReport]) -> None:
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)


def _annotated(reports: list[TestReport], done: list[Round], rounds: int) -> list[TestReport]:
    """The last round's reports, with a section that says every round agreed."""
    counts: dict[StressOutcome, int] = {}
    for round_ in done:
        counts[round_.outcome] = counts.get(round_.outcome, 0) + 1
    text = f"{rounds} rounds, no verdict differed: " + ", ".join(
        f"{n} {outcome}" for outcome, n in counts.items()
    )
    for report in reports:
        if report.when == "call" or (report.failed and report.when == "setup"):
            report.sections.append(("startup-guard stress", text))
            break
    return reports


def _flipped(
    item: pytest.Item,
    reports: list[TestReport],
    reference: Round,
    flipped: Round,
    rounds: int,
) -> list[TestReport]:
    """The flipping round's reports, its call (or first failing) report made a failure that
    names both rounds, their seeds and their replay commands."""
    from pytest_startup_guard.settings.seeds import replay_command

    def line(round_: Round) -> str:
        what = round_.outcome + (f": {round_.first_line}" if round_.first_line else "")
        return (
            f"  round {round_.index + 1} (run seed {round_.run_seed}) {what}\n"
            f"    replay: {replay_command(round_.run_seed, item.nodeid)}"
        )

    message = "\n".join(
        [
            f"startup-guard stress: the verdict of {item.nodeid} differs between rounds"
            f" (round {flipped.index + 1} of {rounds}):",
            line(reference),
            line(flipped),
        ]
    )
    target = next((r for r in reports if r.failed), None) or next(
        (r for r in reports if r.when == "call"), reports[-1]
    )
    original = target.longreprtext
    target.outcome = "failed"
    target.longrepr = message + (f"\n\n{original}" if original else "")
    return reports
