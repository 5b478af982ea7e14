"""Every benchmark runs (quick mode) and reports its figures; no time is asserted here.

One test per benchmark, each through ``benchmarks/run.py --only NAME``: pytest-xdist spreads
them over the workers (run as one test, the quick mode of all of them was the suite's longest
test by far, run last on one worker while the other had nothing left to do)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted(
    path.stem.removeprefix("bench_") for path in (ROOT / "benchmarks").glob("bench_*.py")
)


def test_there_are_benchmarks() -> None:
    assert {"fleet", "races", "windows", "workers"} <= set(BENCHMARKS)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_each_benchmark_runs_in_quick_mode(tmp_path: Path, name: str) -> None:
    out = tmp_path / "results.json"
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--quick",
            "--only",
            name,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = json.loads(out.read_text())
    assert results["machine"]["cores"] >= 1
    assert results["quick"] is True
    reported = {item["benchmark"] for item in results["figures"]}
    assert reported == {f"bench_{name}"}
    for item in results["figures"]:
        assert set(item) >= {"figure", "value", "unit", "target", "passed"}
        assert isinstance(item["value"], (int, float))
    assert "figure" in completed.stdout and "written to" in completed.stdout
