"""What the start-method checks saw: each run (``StartupRun``), and both checks' results.

``StartMethodResult`` (``check_start_methods``) and ``EnvChoiceResult`` (``check_env_choices``)
print every run as a table, and fail with it, and the output tail of each failed run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_startup_guard.imports.table import format_seconds, one_line, render, shorten


@dataclass(frozen=True)
class StartupRun:
    """One fresh start-up: what was set up, what it did, and whether that was expected."""

    label: str  # "default spawn", "already set (spawn)", "ACME_START_METHOD='fork'", ...
    expected: str  # "start" or "fail clearly"
    passed: bool
    problem: str | None  # why it did not pass, in words
    returncode: int | None  # None: killed (time-out, or stopped once ready)
    ready: bool  # the ready pattern appeared
    seconds: float
    error: str  # the last error line of its output ("" when none)
    started_with: tuple[str, ...]  # the start methods of the processes it started
    output_tail: str = ""
    skipped: str | None = None  # why it did not run (a start method this platform lacks)


def _render_runs(runs: Sequence[StartupRun]) -> str:
    header = ("#", "run", "expected", "result", "time", "started with", "what happened")
    rows = [header]
    for number, run in enumerate(runs, 1):
        if run.skipped:
            result, happened = "skipped", run.skipped
        else:
            result = "pass" if run.passed else "FAIL"
            happened = run.problem or _what_happened(run)
        rows.append(
            (
                str(number),
                run.label,
                run.expected,
                result,
                "-" if run.skipped else format_seconds(run.seconds),
                ",".join(run.started_with) or "-",
                shorten(one_line(happened), 150),
            )
        )
    return render(rows)


def _what_happened(run: StartupRun) -> str:
    if run.ready:
        return "became ready"
    if run.returncode == 0:
        return "exited 0"
    return f"exit code {run.returncode}: {run.error}"


def _failure_tails(runs: Sequence[StartupRun]) -> str:
    parts = []
    for number, run in enumerate(runs, 1):
        if not run.passed and not run.skipped and run.output_tail:
            tail = "\n".join(run.output_tail.splitlines()[-12:])
            parts.append(f"--- run {number} ({run.label}): output tail ---\n{tail}")
    return "\n".join(parts)


class _JudgedRuns:
    """What both checks' results share: their failed runs, and the failure that lists them."""

    runs: list[StartupRun]

    @property
    def failures(self) -> list[StartupRun]:
        return [run for run in self.runs if not run.passed and not run.skipped]

    def _fail_if_any(self, headline: str) -> None:
        __tracebackhide__ = True
        if self.failures:
            tails = _failure_tails(self.runs)
            raise AssertionError(f"{headline}\n{self}" + (f"\n{tails}" if tails else ""))


@dataclass
class StartMethodResult(_JudgedRuns):
    """Every mode ``check_start_methods`` ran the start-up in (``.runs``)."""

    startup: str
    runs: list[StartupRun] = field(default_factory=list)

    def __str__(self) -> str:
        verdict = f"{len(self.failures)} of {len(self.runs)} modes failed"
        return f"start methods of {self.startup}: {verdict}\n{_render_runs(self.runs)}"

    def assert_safe(self) -> None:
        """Fail, with every mode in the message, unless the start-up started in each."""
        __tracebackhide__ = True
        self._fail_if_any("the start-up does not start under every start method")


@dataclass
class EnvChoiceResult(_JudgedRuns):
    """Every value ``check_env_choices`` gave the variable, and what the start-up did."""

    startup: str
    variable: str
    allowed: tuple[str, ...]
    unlisted: tuple[str, ...]
    runs: list[StartupRun] = field(default_factory=list)

    def __str__(self) -> str:
        verdict = f"{len(self.failures)} of {len(self.runs)} runs disagree"
        return (
            f"{self.variable} of {self.startup}: documented {', '.join(self.allowed)};"
            f" {verdict}\n{_render_runs(self.runs)}"
        )

    def assert_agree(self) -> None:
        """Fail, with every run in the message, unless documentation and code agree."""
        __tracebackhide__ = True
        self._fail_if_any(
            f"{self.variable}'s documented choices and the code that reads it disagree"
        )
