"""How many misuses of the plugin get a clear error: ``measure_misuse``.

Every case of ``tests/misuse_cases.py`` (wrong types, negative, zero, nan and inf numbers,
unknown names, empty values, missing paths, calls in the wrong order, over the Python API, the
fixtures, the markers, the command-line options, the environment variables, the ini keys and
``startup-guard-report``), run as ``tests/test_misuse.py`` runs it and judged by the same rule:
the run fails with the plugin's own error, which says the case's words (at least the argument's
name and the bad value), and shows no frame of the plugin's internals. Here every pytest is a
subprocess (plugin autoloading off), so nothing depends on a pytest already running.
The target (issue 31): 100 % of the cases.

The generated misuses (``tests/misuse_generated*.py``: Hypothesis strategies of wrong values
for an entry point, derandomized) are counted beside them: the share that got the plugin's
clear error at the call, and the rest by what happened instead (a plugin error without the
value, an internal exception, a silent acceptance, a late failure, a hang).

``python benchmarks/trust_misuse.py [--json PATH]`` prints the figures (``--quick`` runs them
all too: they take seconds); a ``trust`` group can call ``measure_misuse`` itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import Figure, emit, figure, parse_args

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from misuse_cases import CASES, WHERES  # noqa: E402 - found through TESTS
from misuse_generated import VERDICTS, families, verdicts  # noqa: E402
from test_misuse import (  # noqa: E402
    Outcome,
    cli_outcome,
    configure_args,
    configure_outcome,
    grouped_outcomes,
    make_scratch_files,
)
from user_env import user_env  # noqa: E402


def _pytest(folder: Path, args: list[str], extra_env: dict[str, str]) -> tuple[int, str, str]:
    env = {**user_env(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **extra_env}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def measure_misuse() -> dict[str, Any]:
    """Run every misuse case; how many there are, how many got a clear error (and their share),
    per place they are given, and the ids of those that did not with what was wrong."""
    outcomes: dict[str, Outcome] = {}
    with tempfile.TemporaryDirectory(prefix="trust-misuse-") as scratch:
        grouped = Path(scratch) / "grouped"
        grouped.mkdir()
        make_scratch_files(grouped)
        outcomes.update(
            grouped_outcomes(grouped, CASES, lambda *args: _pytest(grouped, list(args), {}))
        )
        for number, case in enumerate(CASES):
            if case.where in ("api", "fixture", "marker"):
                continue
            folder = Path(scratch) / f"case-{number}"
            folder.mkdir()
            make_scratch_files(folder)
            if case.where == "cli":
                outcomes[case.id] = cli_outcome(case, folder)
                continue
            args, env, ini = configure_args(case)
            if ini:
                (folder / "tox.ini").write_text(ini)
            outcomes[case.id] = configure_outcome(*_pytest(folder, args, env))
    unclear = {
        case.id: outcomes[case.id].problems(case)
        if case.id in outcomes
        else ["no outcome: its run never reached it"]
        for case in CASES
        if case.id not in outcomes or outcomes[case.id].problems(case)
    }
    clear = len(CASES) - len(unclear)
    return {
        "cases": len(CASES),
        "clear": clear,
        "share": clear / len(CASES),
        "by_where": {
            where: {
                "cases": sum(1 for case in CASES if case.where == where),
                "clear": sum(1 for c in CASES if c.where == where and c.id not in unclear),
            }
            for where in WHERES
        },
        "unclear": unclear,
        "waiting_for": {case.id: case.needs for case in CASES if case.needs},
    }


GENERATED_EXAMPLES = 100  # a family's examples (20 with --quick)


def measure_generated(examples: int) -> dict[str, Any]:
    """Every family of ``tests/misuse_generated*.py``, ``examples`` derandomized values each
    (the same ones every run): how each call ended, counted by verdict (``VERDICTS``), in all
    and by family."""
    by_family: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="trust-generated-") as scratch:
        for number, family in enumerate(families()):
            counted = verdicts(family, examples, Path(scratch) / f"family-{number}")
            by_family[family.name] = {kind: counted[kind] for kind in VERDICTS}
    totals = {kind: sum(counts[kind] for counts in by_family.values()) for kind in VERDICTS}
    cases = sum(totals.values())
    return {
        "cases": cases,
        "clear": totals["clear"],
        "share": totals["clear"] / cases if cases else 0.0,
        "totals": totals,
        "by_family": by_family,
    }


def generated_figure(quick: bool) -> Figure:
    measured = measure_generated(20 if quick else GENERATED_EXAMPLES)
    totals = measured["totals"]
    counts = ", ".join(f"{kind} {totals[kind]}" for kind in VERDICTS)
    unclear = "; ".join(
        f"{name}: "
        + ", ".join(f"{kind} {n}" for kind, n in counts_.items() if n and kind != "clear")
        for name, counts_ in measured["by_family"].items()
        if counts_["clear"] < sum(counts_.values())
    )
    return figure(
        "trust: generated misuses with a clear error",
        100.0 * measured["share"],
        "%",
        target="100 %",
        passed=measured["clear"] == measured["cases"],
        detail=f"{measured['clear']} of {measured['cases']} over"
        f" {len(measured['by_family'])} families ({counts})"
        + (f"; not: {unclear}" if unclear else ""),
    )


def figures(quick: bool) -> list[Figure]:
    measured = measure_misuse()
    places = ", ".join(
        f"{where} {counts['clear']}/{counts['cases']}"
        for where, counts in measured["by_where"].items()
    )
    unclear = "; ".join(f"{case}: {problems[0]}" for case, problems in measured["unclear"].items())
    return [
        figure(
            "trust: misuse cases",
            measured["cases"],
            "cases",
            target=">= 100",
            passed=measured["cases"] >= 100,
            detail=places,
        ),
        figure(
            "trust: misuses with a clear error",
            100.0 * measured["share"],
            "%",
            target="100 %",
            passed=measured["clear"] == measured["cases"],
            detail=f"{measured['clear']} of {measured['cases']}"
            + (f"; not: {unclear}" if unclear else ""),
        ),
        generated_figure(quick),
    ]


if __name__ == "__main__":
    os.environ.pop("PYTEST_ADDOPTS", None)
    arguments = parse_args(__doc__ or "")
    emit(figures(arguments.quick), arguments)
