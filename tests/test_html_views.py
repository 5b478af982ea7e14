"""The HTML views as a person sees them: rendered in a real headless browser (Chromium).

Each view is produced the way users produce it (pytester runs with ``-p startup_guard``; the
``startup-guard-report merge`` command), then rendered, and a probe measures what is on the
page: the timeline's rows and marks, drawn and visible; the colour of a failing target's cell.
One screenshot per view is kept (``tests/browser.py``: ``.test-artifacts/`` or
``$STARTUP_GUARD_TEST_ARTIFACTS``). Without Chromium these tests skip, saying how to install it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from browser import artifacts_dir, browser, facts, screenshot

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "examples" / "servers" / "config_server.py"

VIEWS_TEST = f"""
import sys
import pytest
from pytest_startup_guard import ready

SERVER = [sys.executable, {str(SERVER)!r}, "--model", "acme/tiny", "--port", "{{port}}",
          "--loader", "hub_json"]
CONFIG = {{"config.json": {{"model_type": "gpt2", "n_layer": 3}}}}

@pytest.mark.parametrize("policy", ["naive", "retry"])
def test_fleet_under_pointer_swap(hub_cache, hub_race, server_fleet, policy):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    hub_race.arm("pointer_swap", repo, "config.json")
    fleet = server_fleet.launch(SERVER + ["--policy", policy], count=2, ready=ready.http("/health"))
    fleet.assert_all_ready()

def test_hang_on_a_corrupt_config(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    hub_cache.corrupt(repo, "config.json", "empty")
    fleet = server_fleet.launch(SERVER + ["--policy", "slow_retry"], count=2,
                                ready=ready.http("/health"), timeout=2)
    fleet.assert_all_failed()
"""

# What the probe measures in each test's section of the standalone report.
SECTIONS_PROBE = """
const visible = (el) => { const b = el.getBoundingClientRect(); return b.width > 0 && b.height > 0; };
return [...document.querySelectorAll('section.sg-test')].map((section) => {
  const svg = section.querySelector('svg.sg-timeline');
  const marks = {};
  for (const kind of ['sg-hit', 'sg-ready', 'sg-exit', 'sg-hang']) {
    marks[kind] = [...section.querySelectorAll('g.sg-mark.' + kind)].filter(visible).length;
  }
  const exit = section.querySelector('g.sg-mark.sg-exit rect, g.sg-mark.sg-exit circle');
  return {
    text: section.textContent,
    failed: section.classList.contains('sg-test-failed'),
    rows: [...section.querySelectorAll('g.sg-row')].map((row) => row.dataset.label),
    marks,
    hits: [...section.querySelectorAll('g.sg-mark.sg-hit title')].map((t) => t.textContent),
    svg: svg ? svg.getBoundingClientRect().width : 0,
    exitFill: exit ? getComputedStyle(exit).fill : null,
  };
});
"""


@pytest.fixture(scope="module")
def chromium() -> str:
    return browser()


def section_of(sections: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [section for section in sections if name in section["text"]]
    return found


def red(colour: str | None) -> bool:
    """``rgb(r, g, b)`` that a person calls red."""
    numbers = [int(n) for n in re.findall(r"\d+", colour or "")][:3]
    return len(numbers) == 3 and numbers[0] > 150 and numbers[1] < 110 and numbers[2] < 110


def test_the_html_report_shows_each_start_up_as_a_timeline_under_xdist(
    chromium: str, guard_pytester: pytest.Pytester
) -> None:
    guard_pytester.makepyfile(test_views=VIEWS_TEST)
    guard_pytester.mkdir("out")  # the plugin creates no folder for a report
    page = guard_pytester.path / "out" / "report.html"
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "xdist", "-n", "2",
        "--startup-guard-html=out/report.html", "--startup-guard-report=out/report.json",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([f"HTML report: {page}"])
    sections = facts(page, SECTIONS_PROBE)
    assert len(sections) == 3
    naive = section_of(sections, "test_fleet_under_pointer_swap[naive]")
    assert naive["failed"] and naive["svg"] > 300
    assert naive["rows"][:3] == ["race pointer_swap", "server 0", "server 1"]
    assert naive["marks"]["sg-exit"] == 2 and naive["marks"]["sg-ready"] == 0
    assert naive["marks"]["sg-hit"] >= 2 and red(naive["exitFill"])
    pids = {int(pid) for pid in re.findall(r"pid (\d+)", " ".join(naive["hits"]))}
    assert len(pids) == 2, naive["hits"]  # hover text: each server's pid, op and path
    # hover text: the operation, the path in the repo, the time
    assert all(
        re.search(
            r" (open|os\.stat|os\.lstat|os\.access|os\.readlink) (refs|snapshots|blobs)/\S+ at \d",
            hit,
        )
        for hit in naive["hits"]
    )
    retry = section_of(sections, "test_fleet_under_pointer_swap[retry]")
    assert not retry["failed"] and retry["marks"]["sg-ready"] == 2 and retry["marks"]["sg-hit"] >= 2
    hang = section_of(sections, "test_hang_on_a_corrupt_config")
    assert hang["marks"]["sg-hang"] == 2 and hang["marks"]["sg-exit"] == 0
    screenshot(page, artifacts_dir() / "html-report.png")


PYTEST_HTML_PROBE = """
const extras = [...document.querySelectorAll('.startup-guard')];
return {
  extras: extras.length,
  timelines: extras.map((e) => [...e.querySelectorAll('svg.sg-timeline g.sg-row')].length),
  exits: document.querySelectorAll('.startup-guard g.sg-mark.sg-exit').length,
  replays: extras.map((e) => (e.textContent.match(/replay: (pytest .*)/) || [])[1] || null),
};
"""


def test_pytest_html_shows_the_timeline_of_each_failed_start_up_under_xdist(
    chromium: str, guard_pytester: pytest.Pytester
) -> None:
    guard_pytester.makepyfile(test_views=VIEWS_TEST)
    page = guard_pytester.path / "pytest-html.html"
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "html", "-p", "metadata", "-p", "xdist", "-n", "2",
        f"--html={page}", "--self-contained-html",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=2)
    seen = facts(page, PYTEST_HTML_PROBE)
    assert seen["extras"] == 2, seen  # the two failed start-up tests, not the passing one
    assert sorted(seen["timelines"]) == [2, 3], seen  # servers (and the race, where armed)
    assert seen["exits"] == 2
    assert all(
        replay and "--startup-guard-seed=" in replay and "test_views.py::" in replay
        for replay in seen["replays"]
    ), seen
    screenshot(page, artifacts_dir() / "pytest-html.png")


def test_without_pytest_html_nothing_is_added_or_imported(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        test_views=VIEWS_TEST
        + """
def test_zz_pytest_html_was_never_imported():
    assert "pytest_html" not in sys.modules
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2, failed=2)


MATRIX_TEST = """
def test_everywhere(hub_race):
    pass

def test_not_on_rocm(hub_race, startup_target):
    assert startup_target != "rocm", "the build lock is never released on ROCm"

def test_broken_everywhere(hub_race):
    raise AssertionError("broken on every target")
"""

MATRIX_PROBE = """
const rows = [...document.querySelectorAll('table.sg-table tr[data-test]')];
const cell = (row, target) => row.querySelector('td[data-target="' + target + '"]');
return rows.map((row) => ({
  test: row.dataset.test,
  onlyOne: row.classList.contains('sg-only-one-target'),
  cells: Object.fromEntries(['cpu', 'cuda', 'rocm'].map((t) => {
    const c = cell(row, t);
    return [t, c ? {bg: getComputedStyle(c).backgroundColor, text: c.textContent.trim(),
                    visible: c.getBoundingClientRect().width > 0} : null];
  })),
}));
"""


def test_the_merged_matrix_puts_a_rocm_only_failure_first_and_highlights_it(
    chromium: str, guard_pytester: pytest.Pytester
) -> None:
    guard_pytester.makepyfile(test_matrix=MATRIX_TEST)
    reports = []
    for target in ("cpu", "cuda", "rocm"):
        report = guard_pytester.path / f"report-{target}.json"
        guard_pytester.runpytest_subprocess(
            "-p", "startup_guard", f"--startup-target={target}", f"--startup-guard-report={report}"
        )  # fmt: skip
        reports.append(str(report))
    page = guard_pytester.path / "matrix.html"
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_startup_guard.report.cli", "merge", *reports, "-o", str(page)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr
    rows = facts(page, MATRIX_PROBE)
    first = rows[0]
    assert first["test"].endswith("test_not_on_rocm") and first["onlyOne"], rows
    assert red(first["cells"]["rocm"]["bg"]) and "failed" in first["cells"]["rocm"]["text"]
    assert not red(first["cells"]["cpu"]["bg"]) and not red(first["cells"]["cuda"]["bg"])
    everywhere = [row for row in rows if row["test"].endswith("test_broken_everywhere")]
    assert everywhere and all(red(cell["bg"]) for cell in everywhere[0]["cells"].values())
    assert not everywhere[0]["onlyOne"]
    passing = next(row for row in rows if row["test"].endswith("test_everywhere"))
    assert not any(red(cell["bg"]) for cell in passing["cells"].values())
    screenshot(page, artifacts_dir() / "matrix.png", size=(1280, 700))


def test_without_a_browser_the_views_skip_saying_how_to_install_one(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makeconftest(f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})")
    guard_pytester.makepyfile(
        """
        import browser

        def test_view():
            browser.browser()
        """
    )
    env = dict(os.environ, PATH="/nonexistent", CHROMIUM="")  # no browser to be found
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", str(guard_pytester.path)],
        capture_output=True, text=True, env=env, cwd=guard_pytester.path, check=False, timeout=120,
    )  # fmt: skip
    assert "1 skipped" in done.stdout, done.stdout
    assert "apt-get install chromium" in done.stdout


WORKERS_PROBE = """
const visible = (el) => { const b = el.getBoundingClientRect(); return b.width > 0 && b.height > 0; };
return [...document.querySelectorAll('g.sg-mark.sg-end')].map((mark) => {
  const badge = mark.querySelector('rect, circle');
  const row = mark.closest('g.sg-row');
  return {
    classes: [...mark.classList],
    pid: mark.dataset.pid,
    visible: visible(mark),
    fill: getComputedStyle(badge).fill,
    label: (mark.querySelector('text.sg-end-label') || {}).textContent,
    title: mark.querySelector('title').textContent,
    row: row ? row.dataset.kind : null,
    problems: [...document.querySelectorAll('ul.sg-worker-problems li')].map((li) => li.textContent),
  };
});
"""


def test_a_worker_that_died_under_a_ready_server_ends_its_row_with_a_red_mark(
    chromium: str, guard_pytester: pytest.Pytester
) -> None:
    """A supervisor answers its probe while one of its two workers dies (the server of
    ``tests/test_report.py``): the dead worker's row ends with a red mark, whose hover text says
    its exit code and its cause, read back as text."""
    from test_report import WORKER_CAUSE, run_workers_fleet

    guard_pytester.mkdir("out")
    result = run_workers_fleet(guard_pytester, "--startup-guard-html=out/report.html")
    result.assert_outcomes(failed=1)
    marks = facts(guard_pytester.path / "out" / "report.html", WORKERS_PROBE)
    failed = [mark for mark in marks if "sg-end-failed" in mark["classes"]]
    assert len(failed) == 1, marks
    (mark,) = failed
    assert mark["visible"] and red(mark["fill"]) and mark["row"] == "child"
    assert mark["label"] == "code 1"
    assert "exited with code 1" in mark["title"] and WORKER_CAUSE in mark["title"]
    assert any(WORKER_CAUSE in problem for problem in mark["problems"])
    # The other worker ended when the fleet was stopped: not drawn as a failure.
    assert all(not red(other["fill"]) for other in marks if other is not mark)
    screenshot(guard_pytester.path / "out" / "report.html", artifacts_dir() / "html-workers.png")
