"""Every benchmark runs (quick mode) and reports its figures; no time is asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_benchmark_runs_in_quick_mode(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = json.loads(out.read_text())
    assert results["machine"]["cores"] >= 1
    scripts = {path.stem for path in (ROOT / "benchmarks").glob("bench_*.py")}
    reported = {item["benchmark"] for item in results["figures"]}
    assert reported == scripts
    for item in results["figures"]:
        assert set(item) >= {"figure", "value", "unit", "target", "passed"}
        assert isinstance(item["value"], (int, float))
    assert "figure" in completed.stdout and "written to" in completed.stdout
