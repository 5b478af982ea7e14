"""Verdicts hold under load: the demo's zoo cases on a quiet machine, and under 2x and 4x CPU
oversubscription.

The demo's cases (``run_demo.ZOO_CASES`` of ``examples/test_zoo.py``: 16 server x case tests,
the expected verdict of each from ``zoo.expected``) run through pytest as ``make demo`` runs
them (``-n 2``), with ``--startup-guard-stress=3``: every case runs 3 rounds on derived seeds,
and fails at a round whose verdict differs from the first one's. Beside each loaded run,
``cpu_load`` (``pytest_startup_guard.fleet.load``) spins 2 or 4 times as many CPU-bound processes as the machine has cores. The
levels run interleaved (quiet, 2x, 4x, quiet, 2x, 4x), each round of them on the same seed, so
machine drift and the seed's races are shared by every level alike.

A flip is a case-run whose verdict differs from the expected one: the plugin's own timing (how
long a server may take to come up, how long a race window stays open) must not turn a correct
server into a broken one, or a broken one into a correct one, when the machine is slow. A run
the plugin calls *undecided* (the machine was too slow to decide) is no verdict, and is counted
apart. The wall time of a loaded run against the quiet one of the same round says what the
load costs. Flips keep their artifacts (``--startup-guard-artifacts``) in a folder named in the
figure's detail.

Stress rounds other than the one that decides are logged nowhere (not in the JUnit XML):
this script is also a pytest plugin (``-p bench_load``), which notes, in the process that logs
reports, each test's "startup-guard stress" section (how many rounds passed, failed or were
undecided) and the full text of each failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from harness import Figure, emit, figure, parse_args

from pytest_startup_guard import cpu_load

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

from run_demo import CASE_ID, ZOO_CASES, Row, run_pytest, zoo_cases  # noqa: E402 - the demo's cases, as it runs them
from zoo import expected  # noqa: E402

LOG_ENV = "BENCH_LOAD_LOG"  # where the plugin half writes its notes (JSON lines)

# -- the plugin half: loaded into the benchmark's pytest runs with ``-p bench_load`` -----------

_log: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Note reports only where they are logged: the xdist controller, not its workers."""
    global _log
    _log = None if hasattr(config, "workerinput") else os.environ.get(LOG_ENV)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _log is None:
        return
    stress = next((text for title, text in report.sections if title == "startup-guard stress"), "")
    if not (report.failed or stress):
        return
    note = {
        "nodeid": report.nodeid,
        "when": report.when,
        "text": report.longreprtext if report.failed else "",
        "stress": stress,
    }
    with open(_log, "a") as out:
        out.write(json.dumps(note) + "\n")


# -- the benchmark --------------------------------------------------------------------------

LEVELS = {"quiet": 0, "2x": 2, "4x": 4}  # CPU-bound processes per core beside the run
OUTCOME = {"passed": "pass", "failed": "fail"}
FLIPPED = re.compile(r"differs between rounds \(round (\d+) of \d+\)")
ROUND = re.compile(r"^\s*round (\d+) \(run seed \d+\) (\w+)", re.MULTILINE)
COUNT = re.compile(r"(\d+) (passed|failed|skipped|undecided)")


@dataclass
class Level:
    runs: int = 0  # case-runs (stress rounds) that ran
    wrong: int = 0  # of them, verdicts that differ from the expected one
    undecided: int = 0
    flipped: dict[str, int] = field(default_factory=dict)  # case -> its wrong verdicts
    seconds: list[float] = field(default_factory=list)  # wall time of each pytest run
    artifacts: list[str] = field(default_factory=list)  # folders of the runs that flipped


def judge(
    rows: list[Row], notes: dict[str, dict[str, str]], rounds: int
) -> list[tuple[str, int, int, int]]:
    """Per case of one pytest run: (case, case-runs, wrong verdicts, undecided runs)."""
    judged = []
    for match, kind, case, policy, outcome, detail in zoo_cases(rows):
        want = expected(policy, kind)
        label = f"{policy} {kind}-{case}"
        note = notes.get(match.group(0), {})
        text = note.get("text", "") or detail
        flip = FLIPPED.search(text)
        counts = {what: int(n) for n, what in COUNT.findall(note.get("stress", ""))}
        named = ROUND.findall(text)
        if flip and named:
            # Rounds before the first decided one were undecided; then it held, then flipped.
            first, first_outcome = named[0]
            ran, first_n = int(flip.group(1)), int(first)
            wrong = ran - first_n if OUTCOME.get(first_outcome, first_outcome) != want else 1
            judged.append((label, ran, wrong, first_n - 1))
        elif counts:  # every decided round agreed
            undecided = counts.pop("undecided", 0)
            decided = OUTCOME.get(next(iter(counts), ""), want)
            judged.append((label, rounds, (rounds - undecided) * (decided != want), undecided))
        else:  # one round (no stress), or a test the rounds never reached
            undecided = rounds if "UNDECIDED" in text and outcome == "fail" else 0
            judged.append(
                (label, rounds, 0 if undecided else rounds * (outcome != want), undecided)
            )
    return judged


def read_notes(path: Path) -> dict[str, dict[str, str]]:
    """The plugin's notes of one run by case id, a test's failure text and stress section."""
    notes: dict[str, dict[str, str]] = {}
    if not path.exists():
        return notes
    for line in path.read_text().splitlines():
        note = json.loads(line)
        match = CASE_ID.search(note["nodeid"])
        if match:
            merged = notes.setdefault(match.group(0), {"text": "", "stress": ""})
            merged["text"] = merged["text"] or note["text"]
            merged["stress"] = merged["stress"] or note["stress"]
    return notes


def main() -> None:
    args = parse_args(__doc__ or "")
    rounds, invocations = (1, 1) if args.quick else (3, 2)
    levels = ["quiet", "2x"] if args.quick else list(LEVELS)
    # A smoke run: the naive and retrying servers only. The slow_retry server's corrupt cases
    # each wait out the readiness time-out (it hangs), which made the quick mode the suite's
    # second-longest test.
    quick_cases = f"({ZOO_CASES}) and (naive or retry) and not slow_retry"
    selection = quick_cases if args.quick else ZOO_CASES
    cores = os.cpu_count() or 1
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    keep = Path(tempfile.mkdtemp(prefix="bench-load-artifacts-"))
    results = {level: Level() for level in levels}
    ratios: dict[str, list[float]] = {level: [] for level in levels if level != "quiet"}
    cases = 0
    with tempfile.TemporaryDirectory(prefix="bench-load-") as folder:
        workdir = Path(folder)
        for invocation in range(invocations):
            seed = invocation + 1  # the same seed at every level of a round
            quiet = None
            for level in levels:
                name = f"{level}-{invocation + 1}"
                log = workdir / f"{name}.notes"
                os.environ[LOG_ENV] = str(log)
                artifacts = keep / name
                with cpu_load(LEVELS[level] * cores, limit=1800.0):
                    started = time.perf_counter()
                    rows = run_pytest(
                        seed, workdir, name, "test_zoo.py", "-k", selection,
                        "-p", "xdist", "-n", "2", "-p", "bench_load",
                        f"--startup-guard-stress={rounds}",
                        f"--startup-guard-artifacts={artifacts}",
                    )  # fmt: skip
                    elapsed = time.perf_counter() - started
                judged = judge(rows, read_notes(log), rounds)
                if not judged:
                    raise SystemExit(f"bench_load: no zoo case ran in {name} (see {workdir})")
                cases = len(judged)
                result = results[level]
                result.seconds.append(elapsed)
                for label, runs, wrong, undecided in judged:
                    result.runs += runs
                    result.wrong += wrong
                    result.undecided += undecided
                    if wrong:
                        result.flipped[label] = result.flipped.get(label, 0) + wrong
                if any(wrong for _, _, wrong, _ in judged):
                    result.artifacts.append(str(artifacts))
                else:
                    shutil.rmtree(artifacts, ignore_errors=True)
                if level == "quiet":
                    quiet = elapsed
                elif quiet is not None:
                    ratios[level].append(elapsed / quiet)
                print(
                    f"   {name}: {elapsed:.0f} s, {sum(w for _, _, w, _ in judged)} flips,"
                    f" {sum(u for _, _, _, u in judged)} undecided",
                    flush=True,
                )
    os.environ.pop(LOG_ENV, None)
    if not any(result.artifacts for result in results.values()):
        shutil.rmtree(keep, ignore_errors=True)

    planned = cases * rounds * invocations
    quiet = results["quiet"]
    quiet_line = (
        f"quiet machine: {quiet.wrong} flips, {quiet.undecided} undecided in {quiet.runs} case-runs"
    )
    figures: list[Figure] = []
    for level in levels:
        if level == "quiet":
            continue
        result = results[level]
        load = f"{LEVELS[level]} x {cores} CPU-bound processes"
        flips = f"; flipped: {describe(result.flipped)}" if result.flipped else ""
        kept = f"; artifacts in {', '.join(result.artifacts)}" if result.artifacts else ""
        ran = f"{result.runs} ran; " if result.runs != planned else ""
        figures.append(
            figure(
                f"load: verdict flips in {planned} demo case-runs, {level} CPU oversubscription",
                result.wrong,
                "runs",
                target="0",
                passed=result.wrong == 0,
                detail=f"{ran}{cases} cases x {rounds} stress rounds x {invocations} pytest runs beside {load};"
                f" {quiet_line}{flips}{kept}",
            )
        )
        figures.append(
            figure(
                f"load: undecided verdicts in {planned} demo case-runs, {level} CPU oversubscription",
                result.undecided,
                "runs",
                target="0",
                passed=result.undecided == 0,
                detail=f"the machine too slow to decide, beside {load}",
            )
        )
        spread = ratios[level]
        figures.append(
            figure(
                f"load: wall time of the demo's cases, {level} / quiet",
                statistics.median(spread),
                "x",
                detail=f"median of {len(spread)} interleaved runs (min {min(spread):.2f},"
                f" max {max(spread):.2f}); quiet {statistics.median(quiet.seconds):.0f} s,"
                f" {level} {statistics.median(result.seconds):.0f} s",
            )
        )
    emit(figures, args)


def describe(flipped: dict[str, int]) -> str:
    return ", ".join(f"{case} ({n})" for case, n in sorted(flipped.items()))


if __name__ == "__main__":
    sys.exit(main())
