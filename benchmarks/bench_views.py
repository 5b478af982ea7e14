"""The HTML views of a large run: how long they take to render, and how big the pages are.

A real JSON report is written once (one pytest run of a chaos race on a test's own cache, in the
test process: thousands of windows and hits, the case that would make a page huge), its test
entry is copied to make a run of 200 start-up tests (a few failed), and three such reports make
a CI matrix. Measured, median of repeated renders: ``report_html`` of the run, one
``timeline_svg``, and ``startup-guard-report merge`` of the matrix (HTML and markdown), with the
page sizes (the SVG caps rows, windows and hits, so a chaos run does not make a huge page).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import Figure, emit, figure, median_seconds, parse_args

from pytest_startup_guard.report.html import report_html
from pytest_startup_guard.report.merge import merge, render_html, render_markdown
from pytest_startup_guard.report.svg import timeline_svg

CHAOS_TEST = """
import json, time
from pytest_startup_guard import chaos

def test_chaos(hub_cache, hub_race):
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    hub_race.arm("pointer_swap", repo, "config.json", trigger=chaos(gap=0.001), allow_miss=True)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        try:
            with open(repo.pointer("config.json")) as handle:
                json.load(handle)
        except OSError:
            pass
"""


def real_report(folder: Path) -> dict[str, Any]:
    """One pytest run with -p startup_guard: its JSON report."""
    (folder / "test_chaos.py").write_text(CHAOS_TEST)
    report = folder / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STARTUP_GUARD_", "PYTEST_"))}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "no:cacheprovider", "-q",
         f"--startup-guard-report={report}", str(folder / "test_chaos.py")],
        cwd=folder, env=env, capture_output=True, check=True, timeout=300,
    )  # fmt: skip
    document: dict[str, Any] = json.loads(report.read_text())
    return document


def large_run(document: dict[str, Any], tests: int, target: str) -> dict[str, Any]:
    """``document`` with its one test copied ``tests`` times (every tenth failed)."""
    run = copy.deepcopy(document)
    (entry,) = document["tests"]
    run["target"] = target
    run["tests"] = []
    for number in range(tests):
        test = copy.deepcopy(entry)
        test["nodeid"] = f"test_chaos.py::test_chaos[{number}]"
        if number % 10 == 0 and (target == "rocm" or number % 20 == 0):
            test["outcome"] = "failed"
        run["tests"].append(test)
    return run


def main() -> None:
    args = parse_args(__doc__ or "")
    tests = 20 if args.quick else 200
    repeats = 1 if args.quick else 5
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="bench-views-") as folder:
        base = real_report(Path(folder))
        race = base["tests"][0]["races"][0]
        runs = {target: large_run(base, tests, target) for target in ("cpu", "cuda", "rocm")}
        paths = []
        for target, run in runs.items():
            path = Path(folder) / f"report-{target}.json"
            path.write_text(json.dumps(run))
            paths.append(str(path))
        page = report_html(runs["cpu"])
        svg = timeline_svg(base["tests"][0]) or ""
        seconds_page = median_seconds(lambda: report_html(runs["cpu"]), repeats)
        seconds_svg = median_seconds(lambda: timeline_svg(base["tests"][0]), repeats)
        started = time.perf_counter()
        matrix = merge([Path(path) for path in paths])
        seconds_load = time.perf_counter() - started
        seconds_matrix = median_seconds(lambda: render_html(matrix), repeats)
        seconds_markdown = median_seconds(lambda: render_markdown(matrix), repeats)
    detail = (
        f"one chaos race: {race['windows_total']} windows, {race['hits_total']} hits in the report"
    )
    figures += [
        figure(f"views: report_html of {tests} start-up tests", 1000 * seconds_page, "ms",
               detail=detail),
        figure(f"views: its page size ({tests} tests)", len(page.encode()) / 1024, "KiB"),
        figure("views: timeline_svg of one chaos test", 1000 * seconds_svg, "ms",
               detail=f"{len(svg.encode()) / 1024:.0f} KiB"),
        figure(f"views: merge: read 3 reports of {tests} tests", 1000 * seconds_load, "ms"),
        figure("views: merge: render the matrix as HTML", 1000 * seconds_matrix, "ms"),
        figure("views: merge: render the matrix as markdown", 1000 * seconds_markdown, "ms"),
    ]  # fmt: skip
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
