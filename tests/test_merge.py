"""``startup-guard-report merge``: the JSON reports of a CI matrix, merged into one table.

The reports are real: one suite run with ``--startup-target=cpu``, ``cuda`` and ``rocm`` (a
forced GPU target runs as told on a machine without one, with a warning). The command runs as a
user runs it, in a subprocess. Reports edited by hand (another version, a duplicate) are
written outside the pytester folder, whose reports ``guard_pytester`` checks against the schema.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_startup_guard.report import merge as merge_module
from pytest_startup_guard.report.cli import output_format
from pytest_startup_guard.report.run_report import SCHEMA, SCHEMA_VERSION

SCRIPT = Path(sys.executable).parent / "startup-guard-report"
WORKFLOW = Path(__file__).parent.parent / "examples" / "ci" / "github-actions.yml"
STUB = (Path(__file__).parent / "stub_server.py").read_text()
TARGETS = ("cpu", "cuda", "rocm")

SUITE = """
import pathlib
import sys

import pytest
from pytest_startup_guard import ready


def test_config_on_rocm(hub_race, startup_target):
    assert startup_target != "rocm", "config.json vanished | on rocm"


def test_broken_everywhere(hub_race):
    raise RuntimeError("broken *everywhere* <b>")


@pytest.mark.flaky(reruns=1)
def test_flaky_on_cuda(hub_race, startup_target):
    marker = pathlib.Path(__file__).with_name(f"attempted-{startup_target}")
    first = not marker.exists()
    marker.write_text("x")
    assert not (first and startup_target == "cuda"), "lost the race once"


def test_fleet(hub_cache, server_fleet):
    hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    server_fleet.launch(
        [sys.executable, "stub.py", "retry", "{port}", "acme/tiny"],
        count=2, timeout=20, ready=ready.http("/"),
    ).assert_all_ready()


@pytest.mark.parametrize("text", ['<i>"&|'])
def test_escaped(hub_race, text):
    pass
"""
EXPECTED = {  # the suite's outcomes per target (pytest's tally)
    "cpu": {"passed": 4, "failed": 1},
    "cuda": {"passed": 4, "failed": 1, "rerun": 1},
    "rocm": {"passed": 3, "failed": 2},
}
ROCM_ONLY = "test_matrix.py::test_config_on_rocm"
HIDDEN_ON_CUDA = "test_matrix.py::test_flaky_on_cuda"
EVERYWHERE = "test_matrix.py::test_broken_everywhere"
FLEET = "test_matrix.py::test_fleet"
ESCAPED = 'test_matrix.py::test_escaped[<i>"&|]'
READY = re.compile(r"2 of 2 ready \(median \d+\.\d\d s, worst \d+\.\d\d s\)")


def make_reports(pytester: pytest.Pytester, targets: tuple[str, ...] = TARGETS) -> list[Path]:
    """Run the suite once per target; the reports, in the order of ``targets``."""
    pytester.makepyfile(test_matrix=SUITE, stub=STUB)
    paths = []
    for target in targets:
        path = pytester.path / f"report-{target}.json"
        result = pytester.runpytest_subprocess(
            "-p", "startup_guard", "-p", "rerunfailures", f"--startup-target={target}",
            f"--startup-guard-report={path.name}", "test_matrix.py",
        )  # fmt: skip
        tally = {
            k: v for k, v in result.parseoutcomes().items() if k not in ("warnings", "warning")
        }
        assert tally == EXPECTED[target], result.stdout.str()
        assert json.loads(path.read_text())["target"] == target
        paths.append(path)
    return paths


def run_merge(
    cwd: Path, *args: str | Path, script: bool = False
) -> subprocess.CompletedProcess[str]:
    """``startup-guard-report ARGS`` (the installed script) or ``python -m ...cli ARGS``."""
    command = [str(SCRIPT)] if script else [sys.executable, "-m", "pytest_startup_guard.report.cli"]
    return subprocess.run(
        [*command, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )


def edited(report: Path, folder: Path, name: str, **changes: Any) -> Path:
    """A copy of ``report`` with some top-level fields changed, outside the pytester folder."""
    document = json.loads(report.read_text())
    document.update(changes)
    path = folder / name
    path.write_text(json.dumps(document))
    return path


class Table(HTMLParser):
    """The rows (``tr[data-test]``) and their target cells (``td[data-target]``) of a page."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.columns: list[str] = []
        self.rows: list[dict[str, Any]] = []
        self.cell: dict[str, Any] | None = None
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "th" and "data-target" in found:
            self.columns.append(found["data-target"])
        elif tag == "tr" and "data-test" in found:
            self.rows.append({"test": found["data-test"], "class": found.get("class", "")})
            self.rows[-1]["cells"] = {}
        elif tag == "td" and "data-target" in found:
            self.cell = {**found, "text": ""}
            self.rows[-1]["cells"][found["data-target"]] = self.cell

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell["text"] += data + " "

    def row(self, nodeid: str) -> dict[str, Any]:
        return next(row for row in self.rows if row["test"] == nodeid)


# -- the table ---------------------------------------------------------------------------------


def test_html_puts_the_rocm_only_failure_first_and_marks_its_cell(
    guard_pytester: pytest.Pytester,
) -> None:
    cpu, cuda, rocm = make_reports(guard_pytester)
    result = run_merge(guard_pytester.path, "merge", rocm, cpu, cuda, "-o", "matrix.html")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    page = (guard_pytester.path / "matrix.html").read_text(encoding="utf-8")
    table = Table(page)
    assert table.columns == ["cpu", "cuda", "rocm"]  # the reports' own targets, in that order
    assert [row["test"] for row in table.rows] == [
        ROCM_ONLY,
        HIDDEN_ON_CUDA,
        EVERYWHERE,
        ESCAPED,
        FLEET,
    ]
    first = table.rows[0]
    assert "sg-only-one-target" in first["class"].split()
    assert [first["cells"][t]["class"] for t in TARGETS] == ["sg-passed", "sg-passed", "sg-failed"]
    assert "config.json vanished | on rocm" in first["cells"]["rocm"]["text"]
    assert all(cell["data-test"] == ROCM_ONLY for cell in first["cells"].values())
    hidden = table.row(HIDDEN_ON_CUDA)
    assert "sg-only-one-target" in hidden["class"].split()
    assert hidden["cells"]["cuda"]["class"].split() == ["sg-other", "sg-hidden"]
    assert hidden["cells"]["cuda"]["data-state"] == "hidden"
    assert "passed on rerun 1" in hidden["cells"]["cuda"]["text"]
    assert "failed first: AssertionError: lost the race once" in hidden["cells"]["cuda"]["text"]
    everywhere = table.row(EVERYWHERE)
    assert "sg-only-one-target" not in everywhere["class"]
    assert {cell["class"] for cell in everywhere["cells"].values()} == {"sg-failed"}
    assert "RuntimeError: broken" in everywhere["cells"]["cpu"]["text"]
    fleet = table.row(FLEET)
    assert all(READY.search(cell["text"]) for cell in fleet["cells"].values()), fleet
    # Escaped everywhere; self-contained: no script, nothing loaded from elsewhere.
    assert table.row(ESCAPED)["cells"]["cpu"]["data-test"] == ESCAPED
    assert '<i>"&' not in page and "&lt;i&gt;&quot;&amp;|" in page
    assert "<b>" not in page and "broken *everywhere* &lt;b&gt;" in page
    assert "<script" not in page.lower()
    assert not re.search(r"\b(src|href)\s*=|url\(|@import", page)
    assert "rocm</strong>: 5 start-up tests: 3 passed, 2 failed; exit status 1" in page


def test_markdown_for_a_job_summary_to_stdout_or_to_a_file(guard_pytester: pytest.Pytester) -> None:
    reports = make_reports(guard_pytester)
    result = run_merge(guard_pytester.path, "merge", *reports, "--format", "markdown", script=True)
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0] == "### startup guard: the CI matrix"
    assert lines[2].startswith("- **cpu**: 5 start-up tests: 4 passed, 1 failed; exit status 1")
    assert lines[3].startswith(
        "- **cuda**: 5 start-up tests: 4 passed, 1 failed; 1 passed only on a rerun;"
    )
    assert lines[4].startswith("- **rocm**: 5 start-up tests: 3 passed, 2 failed; exit status 1")
    header = lines.index("| test | cpu | cuda | rocm |")
    assert lines[header + 1] == "|---|---|---|---|"
    rows = lines[header + 2 :]
    assert rows[0] == (
        f"| `{ROCM_ONLY}`<br>**fails on rocm only** | ✅ passed | ✅ passed"
        " | ❌ failed<br>AssertionError: config.json vanished \\| on rocm |"
    )
    assert rows[1].startswith(f"| `{HIDDEN_ON_CUDA}`<br>**fails on cuda only** | ✅ passed")
    assert "| ⚠️ passed on rerun 1<br>failed first: AssertionError: lost the race once |" in rows[1]
    assert rows[2].startswith(f"| `{EVERYWHERE}`<br>**fails on cpu, cuda, rocm** | ❌ failed")
    assert "RuntimeError: broken \\*everywhere\\* \\<b\\> |" in rows[2]  # markdown escaped
    assert rows[3].startswith('| `test_matrix.py::test_escaped[<i>"&\\|]` | ✅ passed')
    assert READY.search(rows[4]) and len(rows) == 5
    # Every row has one cell per column: no pipe leaked out of a node id or a message.
    assert all(len(re.split(r"(?<!\\)\|", row)) == 6 for row in rows), rows
    # To a file: -o without --format html writes markdown (the suffix is not .html).
    written = run_merge(guard_pytester.path, "merge", *reports, "-o", "summary.md")
    assert (written.returncode, written.stdout) == (0, "")
    assert (guard_pytester.path / "summary.md").read_text(encoding="utf-8") == result.stdout


def test_a_missing_report_is_a_warning_and_its_target_is_left_out(
    guard_pytester: pytest.Pytester,
) -> None:
    (cpu,) = make_reports(guard_pytester, ("cpu",))
    result = run_merge(guard_pytester.path, "merge", cpu, "report-rocm.json", "-o", "m.html")
    assert result.returncode == 0
    assert result.stderr == (
        "startup-guard-report: warning: report-rocm.json does not exist (did its job run and"
        " upload it?); its target is left out\n"
    )
    page = (guard_pytester.path / "m.html").read_text(encoding="utf-8")
    assert Table(page).columns == ["cpu"]
    assert "no report at report-rocm.json: its target is not in the table" in page
    markdown = run_merge(guard_pytester.path, "merge", cpu, "report-rocm.json")
    assert "| test | cpu |" in markdown.stdout.splitlines()
    assert "- ⚠️ no report at report-rocm.json: its target is not in the table" in markdown.stdout
    # Nothing at all to merge is an error.
    none = run_merge(guard_pytester.path, "merge", "report-cuda.json", "report-rocm.json")
    assert none.returncode == 2 and none.stdout == ""
    assert none.stderr.endswith(
        "error: no report to merge: report-cuda.json, report-rocm.json do not exist\n"
    )


# -- what it refuses -------------------------------------------------------------------------


def test_a_report_of_another_version_or_schema_is_refused(
    guard_pytester: pytest.Pytester, tmp_path: Path
) -> None:
    (cpu,) = make_reports(guard_pytester, ("cpu",))
    old = edited(cpu, tmp_path, "report-old.json", version=1, target="rocm")
    result = run_merge(tmp_path, "merge", cpu, old, "-o", "m.html")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"startup-guard-report: error: {old} is a report of version 1; this startup-guard-report"
        f" reads version {SCHEMA_VERSION} only (merge reports written by the same"
        " pytest-startup-guard version as this one)\n"
    )
    assert not (tmp_path / "m.html").exists()
    other = edited(cpu, tmp_path, "other.json", schema="junit")
    result = run_merge(tmp_path, "merge", other)
    assert result.returncode == 2
    assert f"{other} is not a pytest-startup-guard-report file: its \"schema\" is 'junit'" in (
        result.stderr
    )


def test_two_reports_of_one_target_are_refused(
    guard_pytester: pytest.Pytester, tmp_path: Path
) -> None:
    (cpu,) = make_reports(guard_pytester, ("cpu",))
    again = shutil.copy(cpu, tmp_path / "report-cpu-again.json")
    result = run_merge(tmp_path, "merge", cpu, again)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"startup-guard-report: error: {cpu} and {again} are both reports of target cpu:"
        " give one report per target\n"
    )


def test_a_file_that_is_not_json_is_refused(
    guard_pytester: pytest.Pytester, tmp_path: Path
) -> None:
    (cpu,) = make_reports(guard_pytester, ("cpu",))
    (tmp_path / "report-cuda.json").write_text("<html>502 Bad Gateway</html>")
    result = run_merge(tmp_path, "merge", cpu, "report-cuda.json")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(
        "startup-guard-report: error: report-cuda.json is not JSON: Expecting value: line 1"
    )
    (tmp_path / "list.json").write_text("[]")
    listed = run_merge(tmp_path, "merge", "list.json")
    assert listed.returncode == 2 and "list.json is not a pytest-startup-guard-report file" in (
        listed.stderr
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "error: the following arguments are required: COMMAND"),
        (("split", "report.json"), "error: argument COMMAND: invalid choice: 'split'"),
        (("merge",), "error: the following arguments are required: REPORT"),
        (("merge", "r.json", "--format", "pdf"), "argument --format: invalid choice: 'pdf'"),
    ],
)
def test_usage_errors_exit_2_with_the_usage(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result = run_merge(tmp_path, *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("usage: startup-guard-report ")
    assert message in result.stderr


# -- pieces ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "output", "expected"),
    [
        (None, None, "markdown"),
        (None, "matrix.html", "html"),
        (None, "out/Matrix.HTM", "html"),
        (None, "summary.md", "markdown"),
        ("html", None, "html"),
        ("markdown", "matrix.html", "markdown"),
    ],
)
def test_the_format_is_the_flag_else_html_for_an_html_file(
    given: str | None, output: str | None, expected: str
) -> None:
    assert output_format(given, None if output is None else Path(output)) == expected


def test_targets_come_cpu_cuda_rocm_and_a_target_the_schema_does_not_name_is_refused(
    guard_pytester: pytest.Pytester, tmp_path: Path
) -> None:
    (cpu,) = make_reports(guard_pytester, ("cpu",))
    paths = [edited(cpu, tmp_path, f"{t}.json", target=t) for t in ("rocm", "cuda")]
    matrix = merge_module.merge([*paths, cpu])
    assert matrix.targets == ["cpu", "cuda", "rocm"]
    tpu = edited(cpu, tmp_path, "tpu.json", target="tpu")
    with pytest.raises(merge_module.MergeError) as refused:
        merge_module.merge([tpu, cpu])
    assert str(refused.value) == (
        f"{tpu} is not a valid version {SCHEMA_VERSION} report: field /target: expected one of"
        ' "cpu", "cuda", "rocm", found "tpu"'
    )


def test_verdicts_and_readiness_in_words() -> None:
    def verdict(kind: str, passed: bool | None, **more: Any) -> dict[str, Any]:
        return {"kind": kind, "checked": True, "passed": passed, "undecided": False, **more}

    words = merge_module.verdict_words
    assert words(verdict("transient", True)) == "survived"
    assert words(verdict("transient", False)) == "did not survive"
    assert words(verdict("corrupt", True)) == "failed closed"
    assert words(verdict("corrupt", False)) == "did not fail closed"
    assert words(verdict("transient", False, undecided=True)) == (
        "undecided: the machine was too slow to decide"
    )
    assert words(verdict("transient", None, checked=False)) == "verdict never checked"
    assert words(None) == ""
    ready = merge_module.ready_words
    assert ready({"servers": 3, "ready": 2, "median": 0.5, "worst": 1.25}) == (
        "2 of 3 ready (median 0.50 s, worst 1.25 s)"
    )
    assert ready({"servers": 2, "ready": 0, "median": None, "worst": None}) == "0 of 2 ready"
    assert ready(None) == ""


def test_markdown_escapes_what_a_table_cell_would_read() -> None:
    assert merge_module.markdown_text("a|b\nc*d_e\r\n<x>") == "a\\|b<br>c\\*d\\_e<br>\\<x\\>"
    assert merge_module.markdown_code("t.py::test[a|b]") == "`t.py::test[a\\|b]`"
    assert merge_module.markdown_code("t.py::test[`x`]") == "``t.py::test[`x`]``"
    assert merge_module.markdown_code("`x`") == "`` `x` ``"


def test_it_reads_the_schema_and_version_the_plugin_writes() -> None:
    assert (merge_module.SCHEMA, merge_module.READS_VERSION) == (SCHEMA, SCHEMA_VERSION)


def test_the_command_imports_no_pytest(guard_pytester: pytest.Pytester) -> None:
    (cpu,) = make_reports(guard_pytester, ("cpu",))
    script = (
        "import sys\n"
        "from pytest_startup_guard.report import cli\n"
        f"assert cli.main(['merge', {str(cpu)!r}, '-o', 'm.html']) == 0\n"
        f"assert cli.main(['merge', {str(cpu)!r}, '-o', 'm.md']) == 0\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('pytest', '_pytest')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=guard_pytester.path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "[]\n", "")


def test_the_ci_example_merges_the_reports_the_matrix_uploads(
    guard_pytester: pytest.Pytester,
) -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    matrix_job, summary = workflow["jobs"]["pytest"], workflow["jobs"]["matrix-summary"]
    assert (summary["needs"], summary["if"]) == ("pytest", "always()")
    (upload,) = [s for s in matrix_job["steps"] if "upload-artifact" in s.get("uses", "")]
    (download,) = [s for s in summary["steps"] if "download-artifact" in s.get("uses", "")]
    assert download["uses"] == "actions/download-artifact@v4"
    assert download["with"] == {"pattern": "startup-guard-*", "merge-multiple": True}
    assert fnmatch.fnmatch(
        upload["with"]["name"].replace("${{ matrix.target }}", "rocm"), "startup-guard-*"
    )
    (merge_step,) = [
        s for s in summary["steps"] if "startup-guard-report merge" in s.get("run", "")
    ]
    (kept,) = [s for s in summary["steps"] if "upload-artifact" in s.get("uses", "")]
    assert kept["with"]["path"] == "matrix.html"
    assert not fnmatch.fnmatch(kept["with"]["name"], "startup-guard-*")
    # The step's script, as the runner runs it, where the cuda job uploaded nothing.
    make_reports(guard_pytester, ("cpu", "rocm"))
    summary_file = guard_pytester.path / "step-summary.md"
    result = subprocess.run(
        ["bash", "-e", "-c", merge_step["run"]],
        cwd=guard_pytester.path,
        env={**os.environ, "PATH": f"{SCRIPT.parent}{os.pathsep}{os.environ['PATH']}",
             "GITHUB_STEP_SUMMARY": str(summary_file)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    assert "| test | cpu | rocm |" in summary_file.read_text(encoding="utf-8").splitlines()
    page = (guard_pytester.path / "matrix.html").read_text(encoding="utf-8")
    assert Table(page).rows[0]["test"] == ROCM_ONLY
