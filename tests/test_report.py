"""The session report: terminal summary, timeline, artifacts, JSON report, reruns.

Fleets here are tiny standard-library servers (no transformers), so that every run is quick.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from report_schema import validate, validator

from pytest_startup_guard.report import words
from pytest_startup_guard.report.artifacts import folder_name
from pytest_startup_guard.report.record import StartupRecord, server_facts
from pytest_startup_guard.report.run_report import SCHEMA_FILE
from pytest_startup_guard.report.timeline import Lane, render

if TYPE_CHECKING:
    from pytest_startup_guard.fleet.workers import Worker

STUB = (Path(__file__).parent / "stub_server.py").read_text()

COMMON = """
import sys
from pytest_startup_guard import on_access, ready

CONFIG = {"config.json": {"model_type": "gpt2"}}

def launch(server_fleet, policy, count=2):
    return server_fleet.launch(
        [sys.executable, "stub.py", policy, "{port}", "acme/tiny"],
        count=count, timeout=20, ready=ready.http("/"),
    )

def raced_fleet(hub_cache, hub_race, server_fleet, policy, count=2):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    # A hold of its own: the report's words and windows do not follow the default hold.
    hub_race.arm("pointer_swap", repo, "config.json", trigger=on_access(hold=0.5))
    return launch(server_fleet, policy, count)
"""

FLEET_TESTS = """
import pytest
from common import CONFIG, launch, raced_fleet

def test_retry_survives(hub_cache, hub_race, server_fleet):
    raced_fleet(hub_cache, hub_race, server_fleet, "retry").assert_all_ready()

def test_naive_dies(hub_cache, hub_race, server_fleet):
    raced_fleet(hub_cache, hub_race, server_fleet, "naive").assert_all_ready()
"""


@pytest.fixture
def report_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(stub=STUB, common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    """``assert_outcomes`` knows no ``rerun``, which pytest-rerunfailures adds to the tally
    (warnings: ``-p xdist`` in a pytester run warns that xdist cannot be rewritten)."""
    return {k: v for k, v in result.parseoutcomes().items() if k not in ("warnings", "warning")}


def section(result: pytest.RunResult) -> list[str]:
    """The lines of the ``startup guard`` summary section."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if re.match(r"=+ startup guard =+$", line))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("="))
    return lines[start + 1 : end]


def test_the_schema_holds_to_its_draft_and_rejects_a_broken_report() -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert type(validator()).__name__ == "Draft202012Validator"  # checked against its metaschema
    assert schema["properties"]["version"] == {"const": 5}
    broken: dict[str, Any] = {"schema": "pytest-startup-guard-report", "version": 4, "tests": [{}]}
    errors = validate(broken)
    assert "$.version: 5 was expected" in errors
    assert "$: 'seed' is a required property" in errors
    assert "$.tests[0]: 'nodeid' is a required property" in errors


# -- the JSON report ---------------------------------------------------------------------------


def test_json_report_validates_under_xdist_and_holds_every_start_up_test(
    report_pytester: pytest.Pytester,
) -> None:
    report_pytester.makepyfile(
        test_fleets=FLEET_TESTS,
        test_cases="""
        import pytest
        from common import CONFIG, launch

        @pytest.mark.startup_races(transient=["pointer_swap"], corrupt=["empty"])
        def test_case(startup_case, hub_cache, server_fleet):
            repo = hub_cache.add_model("acme/tiny", CONFIG)
            startup_case.apply(repo, "config.json")
            startup_case.check(launch(server_fleet, "retry", count=1))

        @pytest.mark.skip(reason="not on this runner")
        def test_skipped(hub_race):
            pass

        def test_not_a_start_up_test(hub_cache):
            pass
        """,
    )
    path = report_pytester.path / "reports" / "startup.json"
    path.parent.mkdir()
    path.write_text("an older report")
    result = report_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "xdist", "-n", "2", "--startup-guard-seed=7", "--startup-target=cpu",
        "--startup-guard-report=reports/startup.json",
    )  # fmt: skip
    result.assert_outcomes(passed=4, failed=1, skipped=1)
    document = json.loads(path.read_text())
    assert validate(document) == []
    assert sorted(p.name for p in path.parent.iterdir()) == ["startup.json"]  # no temp file left
    assert (document["seed"], document["target"], document["exit_status"]) == (7, "cpu", 1)
    assert document["versions"]["pytest"] == pytest.__version__
    assert document["versions"]["pytest-startup-guard"] is not None
    assert 1 <= document["workers"] <= 2
    tests = {test["nodeid"].split("::")[1]: test for test in document["tests"]}
    assert sorted(tests) == [
        "test_case[corrupt-empty]",
        "test_case[transient-pointer_swap]",
        "test_naive_dies",
        "test_retry_survives",
        "test_skipped",
    ]
    assert document["totals"] == {
        "tests": 5, "passed": 3, "failed": 1, "error": 0, "skipped": 1, "xfailed": 0,
        "xpassed": 0, "hidden_by_reruns": 0, "absorbed_servers": 3,
    }  # fmt: skip
    survived = tests["test_retry_survives"]
    assert survived["outcome"] == "passed" and survived["worker"] in ("gw0", "gw1")
    (race,) = survived["races"]
    assert (race["name"], race["filename"], race["windows_total"]) == (
        "pointer_swap",
        "config.json",
        1,
    )
    assert {p["member"] for p in race["hits_per_process"]} == {"server 0", "server 1"}
    assert race["windows"][0]["closed"] > race["windows"][0]["opened"]
    (fleet,) = survived["fleets"]
    assert [s["ready"] and s["absorbed"] for s in fleet["servers"]] == [True, True]
    assert survived["time_to_ready"]["ready"] == 2
    assert survived["time_to_ready"]["worst"] >= survived["time_to_ready"]["median"] > 0
    died = tests["test_naive_dies"]
    assert died["outcome"] == "failed" and died["absorbed"] == {"servers": 0, "hits": 0}
    assert died["attempts"][0]["failure"] == "AssertionError: not every server became ready"
    assert [s["returncode"] for s in died["fleets"][0]["servers"]] == [1, 1]
    assert "cannot load config.json of acme/tiny" in died["fleets"][0]["servers"][0]["output_tail"]
    assert died["replay"] == (
        "pytest -p startup_guard --startup-guard-seed=7 test_fleets.py::test_naive_dies"
    )
    corrupt = tests["test_case[corrupt-empty]"]
    assert corrupt["verdict"]["expected"] == "fail closed" and corrupt["verdict"]["passed"]
    assert [(c["kind"], c["filename"]) for c in corrupt["corruptions"]] == [
        ("empty", "config.json")
    ]
    transient = tests["test_case[transient-pointer_swap]"]
    assert (transient["verdict"]["case"], transient["verdict"]["passed"]) == (
        "transient-pointer_swap",
        True,
    )
    assert tests["test_skipped"]["outcome"] == "skipped"
    # The controller's summary is made from what the workers sent.
    lines = section(result)
    assert lines[0] == "target cpu (from --startup-target), seed 7 (--startup-guard-seed)"
    assert "5 start-up tests: 3 passed, 1 failed, 1 skipped; " in lines[1]
    assert "FAILED test_fleets.py::test_naive_dies" in lines
    assert f"JSON report: {path}" in lines


@pytest.mark.parametrize("option", ["--startup-guard-report", "--startup-guard-html"])
def test_a_report_path_that_cannot_be_written_stops_the_run_before_any_test(
    guard_pytester: pytest.Pytester, option: str
) -> None:
    guard_pytester.makepyfile("def test_races(hub_race):\n    pass\n")
    (guard_pytester.path / "a-file").write_text("")
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", f"{option}=a-file/report")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "passed" not in result.stdout.str()  # no test ran
    result.stderr.fnmatch_lines(
        [f"*invalid {option} 'a-file/report'*a-file is a file, not a folder*"]
    )


@pytest.mark.parametrize("option", ["--startup-guard-report", "--startup-guard-html"])
def test_a_report_whose_folder_goes_away_during_the_run_fails_the_run(
    guard_pytester: pytest.Pytester, option: str
) -> None:
    guard_pytester.mkdir("out")
    guard_pytester.makepyfile(
        "import shutil\n\ndef test_races(hub_race):\n    shutil.rmtree('out')\n"
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", f"{option}=out/report")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(["could not write the report: *out/report*"])


# -- terminal summary, timeline, artifacts -------------------------------------------------------


def test_summary_is_one_total_line_when_all_is_well_and_one_line_per_test_at_v(
    report_pytester: pytest.Pytester,
) -> None:
    report_pytester.makepyfile(
        """
        from common import raced_fleet

        def test_one(hub_cache, hub_race, server_fleet):
            raced_fleet(hub_cache, hub_race, server_fleet, "retry").assert_all_ready()

        def test_two(hub_cache, hub_race, server_fleet):
            raced_fleet(hub_cache, hub_race, server_fleet, "retry", count=1).assert_all_ready()

        def test_unrelated():
            pass
        """
    )
    quiet = report_pytester.runpytest_subprocess("-p", "startup_guard", "--startup-guard-seed=3")
    quiet.assert_outcomes(passed=3)
    lines = section(quiet)
    assert len(lines) == 2, lines
    assert lines[0].startswith("target cpu (") and lines[0].endswith(
        ", seed 3 (--startup-guard-seed)"
    )
    assert re.fullmatch(
        r"2 start-up tests: 2 passed; 2 races armed, 2 windows, \d+ hits;"
        r" 3 of 3 servers ready \(median \d+\.\d\d s, worst \d+\.\d\d s\); 3 absorbed a race",
        lines[1],
    ), lines[1]
    verbose = report_pytester.runpytest_subprocess("-p", "startup_guard", "-v")
    lines = section(verbose)
    assert len(lines) == 4, lines
    assert re.fullmatch(
        r"PASSED test_summary_\w+\.py::test_one: pointer_swap \(1 window, \d+ hits in 2 processes\);"
        r" 2 of 2 ready \(median \d+\.\d\d s, worst \d+\.\d\d s\); 2 absorbed a race",
        lines[2],
    ), lines[2]
    assert lines[3].startswith("PASSED test_summary_") and "::test_two: " in lines[3]


def test_failed_race_test_has_a_timeline_and_artifacts(report_pytester: pytest.Pytester) -> None:
    report_pytester.makepyfile(test_fleets=FLEET_TESTS)
    result = report_pytester.runpytest_subprocess(
        "-p", "startup_guard", "--startup-guard-seed=11", "--startup-guard-artifacts=ci/artifacts",
        "--junitxml=junit.xml",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    # The timeline, in the failure message: 100 columns, one row per race and per server.
    start = result.outlines.index(
        next(line for line in result.outlines if "startup-guard timeline" in line)
    )
    timeline = result.outlines[start + 1 : start + 9]
    assert timeline[0].startswith("timeline: 0 = release of the fleet; one column = ")
    assert all(len(line) <= 100 for line in timeline)
    race, server0, server1 = timeline[3:6]
    assert re.fullmatch(r"race pointer_swap +\| *#+", race), race
    for row, index in ((server0, 0), (server1, 1)):
        assert re.fullmatch(rf"server {index} pid \d+ +\| *-+[-*o]*\*[-*o]*X", row), row
    assert timeline[6].startswith(
        "legend: o open  l listdir/scandir  c rename/mkdir/remove/lock/..."
    )
    assert text.count("startup-guard timeline") == 1  # only the failed test has one
    junit = (report_pytester.path / "junit.xml").read_text()
    assert "startup-guard timeline" in junit and "race pointer_swap" in junit
    # The summary names the races, hits per process, the fleet, the failure, artifacts, replay.
    lines = section(result)
    assert lines[2] == "FAILED test_fleets.py::test_naive_dies"
    assert re.fullmatch(
        r"  race pointer_swap on config.json of acme/tiny@main with on_access\(hold=0.5\):"
        r" 1 window; hits: pid \d+ \(server 0\) x\d, pid \d+ \(server 1\) x\d",
        lines[3],
    ), lines[3]
    assert re.fullmatch(
        r"  fleet 1: 0 of 2 ready: server 0 exited with code 1 after \d+\.\d\d s;"
        r" server 1 exited with code 1 after \d+\.\d\d s",
        lines[4],
    ), lines[4]
    assert lines[5] == "  failure (call): AssertionError: not every server became ready"
    folder = report_pytester.path / "ci" / "artifacts" / "test_fleets.py__test_naive_dies"
    assert lines[6] == f"  artifacts: {folder}"
    assert lines[7] == (
        "  replay: pytest -p startup_guard --startup-guard-seed=11 test_fleets.py::test_naive_dies"
    )
    # Artifacts: for the failed test only, with what is needed to debug it.
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "cache-listing.json",
        "failure.txt",
        "fleet-0/server-0.log",
        "fleet-0/server-1.log",
        "processes.json",
        "races.json",
        "test.json",
        "timeline.txt",
    ]
    assert "cannot load config.json of acme/tiny" in (folder / "fleet-0/server-1.log").read_text()
    assert (folder / "timeline.txt").read_text().splitlines()[3:6] == timeline[3:6]
    failure = (folder / "failure.txt").read_text()
    assert "attempt 1, failed in call" in failure and "not every server became ready" in failure
    (armed,) = json.loads((folder / "races.json").read_text())
    # One hit a server: its look at the config's pointer, with the pointer gone (it died of it).
    assert armed["hits_total"] == 2 and armed["windows"][0]["closed"] is None  # open at the failure
    (listing,) = json.loads((folder / "cache-listing.json").read_text()).values()
    paths = {entry["path"]: entry for entry in listing}
    assert paths["models--acme--tiny/refs/main"] == {
        "path": "models--acme--tiny/refs/main", "kind": "file", "size": 40,
    }  # fmt: skip
    snapshot = [p for p in paths if p.startswith("models--acme--tiny/snapshots/")]
    assert len(snapshot) == 1, "the pointer was swapped out at the failure: only its folder"
    processes = json.loads((folder / "processes.json").read_text())
    assert sorted(p["member"] for p in processes) == ["server 0", "server 1"]


EXPLORED = """
import sys
from pytest_startup_guard import ready
from common import CONFIG

def explore(hub_cache, server_fleet, marker):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    return server_fleet.explore(
        [sys.executable, "stub.py", "retry", "{port}", "acme/tiny", marker],
        "pointer_swap", repo, "config.json",
        ready=ready.http("/"), timeout=20, hold=0.2,
    )

def test_explored(hub_cache, server_fleet, tmp_path):
    explore(hub_cache, server_fleet, str(tmp_path / "ran-once"))

def test_explored_and_checked(hub_cache, server_fleet, tmp_path):
    explore(hub_cache, server_fleet, str(tmp_path / "ran-once")).assert_all_survived()
"""

# Every point is run: a clean start-up of one member, then points 1, 2 and 3.
EXPLORED_WORDS = (
    "explored pointer_swap on config.json of acme/tiny@main (parallel):"
    " 3 points: 2 survived, 1 not reached"
)


def test_an_exploration_reports_every_outcome_of_its_points(
    report_pytester: pytest.Pytester,
) -> None:
    """Only the clean start-up re-reads its config: the third access point is never reached
    again, which the summary, the JSON report and the HTML report say, not just "0 failed"."""
    report_pytester.makepyfile(test_explored=EXPLORED)
    result = report_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-v", "--startup-guard-report=report.json",
        "--startup-guard-html=report.html",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    lines = section(result)
    assert "; 2 explorations: 6 points: 4 survived, 2 not reached" in lines[1], lines[1]
    assert lines[2].startswith(f"PASSED test_explored.py::test_explored: {EXPLORED_WORDS}; ")
    failed = lines.index("FAILED test_explored.py::test_explored_and_checked")
    assert lines[failed + 1] == f"  {EXPLORED_WORDS}"
    document = json.loads((report_pytester.path / "report.json").read_text())
    assert validate(document) == []
    for test in document["tests"]:
        assert test["explorations"] == [
            {
                "race": "pointer_swap", "target": "config.json of acme/tiny@main",
                "mode": "parallel", "points": 3, "found": 3, "launches": 4, "explored": 3,
                "startups": 4, "survived": 2,
                "failed": 0, "undecided": 0, "not_reached": 1, "inferred_points": [],
            }
        ]  # fmt: skip
    page = (report_pytester.path / "report.html").read_text()
    assert page.count(f'<p class="sg-exploration">{EXPLORED_WORDS}</p>') == 2


# -- reruns ----------------------------------------------------------------------------------

ONCE = """
import pathlib, pytest
from pytest_startup_guard import on_access

def first_attempt(name):
    marker = pathlib.Path(__file__).with_name(f"attempted-{name}")
    first = not marker.exists()
    marker.write_text("x")
    return first
"""


def test_default_no_rerun_mark_applies_only_to_start_up_tests(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        test_default=ONCE
        + """
def test_race(hub_race):
    assert not first_attempt("race")

def test_case_fleet(server_fleet):
    assert not first_attempt("fleet")

def test_cache_only(hub_cache):
    assert not first_attempt("cache")

def test_plain():
    assert not first_attempt("plain")
""",
        test_own=ONCE
        + """
@pytest.mark.flaky(reruns=1)
def test_race_with_its_own_flaky_mark(hub_race):
    assert not first_attempt("own")
""",
    )
    args = ("-p", "startup_guard", "-p", "rerunfailures", "--strict-markers", "--reruns=2")
    result = guard_pytester.runpytest_subprocess(*args, "-rA")
    assert outcomes(result) == dict(passed=3, failed=2, rerun=3)
    result.stdout.fnmatch_lines(
        ["FAILED test_default.py::test_race - AssertionError: assert not True"]
    )
    result.stdout.fnmatch_lines(
        ["FAILED test_default.py::test_case_fleet - AssertionError: assert not True"]
    )
    for marker in guard_pytester.path.glob("attempted-*"):
        marker.unlink()
    allowed = guard_pytester.runpytest_subprocess(*args, "-o", "startup_guard_allow_reruns=true")
    assert outcomes(allowed) == dict(passed=5, rerun=5)
    for marker in guard_pytester.path.glob("attempted-*"):
        marker.unlink()
    # Without pytest-rerunfailures no flaky mark is added: --strict-markers still passes.
    without = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "no:rerunfailures", "--strict-markers", "test_default.py"
    )
    without.assert_outcomes(failed=4)


FLAKY_RACE = (
    ONCE
    + """
@pytest.mark.flaky(reruns=1)
def test_reads_config(hub_cache, hub_race):
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    hub_race.arm("pointer_swap", repo, "config.json", trigger=on_access(hold=0.2), allow_miss=True)
    if first_attempt("flaky"):
        repo.pointer("config.json").read_text()  # no retry: the race wins
    else:
        hub_race.armed[0].disarm()
        assert repo.pointer("config.json").read_text()

def test_steady(hub_race):
    pass
"""
)


def test_a_rerun_that_hid_a_failure_is_reported(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(FLAKY_RACE)
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "rerunfailures", "--startup-guard-report=report.json",
        "--startup-guard-artifacts=artifacts", "--startup-guard-seed=5",
    )  # fmt: skip
    assert outcomes(result) == dict(passed=2, rerun=1)
    assert result.ret == pytest.ExitCode.OK
    lines = section(result)
    # Totals describe each test's last attempt: the rerun's race opened no window.
    assert lines[1] == "2 start-up tests: 2 passed; 1 race armed, 0 windows, 0 hits; 1 rerun"
    nodeid = "test_a_rerun_that_hid_a_failure_is_reported.py::test_reads_config"
    assert lines[2] == (
        f"PASSED ON RERUN {nodeid}: a rerun hid the failure of attempt 1 (call):"
        " FileNotFoundError: [Errno 2] No such file or directory: "
        + lines[2].split("No such file or directory: ", 1)[1]
    )
    assert lines[2].endswith("config.json'")
    folder = guard_pytester.path / "artifacts" / folder_name(nodeid, 0)
    assert lines[3:6] == [
        f"  artifacts: {folder}",
        f"  replay: pytest -p startup_guard --startup-guard-seed=5 {nodeid}",
        "(--startup-guard-strict-reruns makes a run like this one fail)",
    ]
    # The first attempt's timeline shows the test process's access that hit the window.
    timeline = (folder / "timeline.txt").read_text().splitlines()
    assert re.fullmatch(r"test pid \d+ +\| *\*", timeline[4]), timeline
    assert not (folder.parent / folder_name(nodeid, 1)).exists()  # the rerun passed
    document = json.loads((guard_pytester.path / "report.json").read_text())
    assert validate(document) == []
    (test, steady) = document["tests"]
    assert (test["outcome"], test["reruns"], steady["reruns"]) == ("passed", 1, 0)
    assert test["hidden_failure"]["attempt"] == 0
    assert test["hidden_failure"]["failure"].startswith("FileNotFoundError: [Errno 2]")
    assert [a["outcome"] for a in test["attempts"]] == ["failed", "passed"]
    assert test["attempts"][0]["artifacts"] == str(folder)
    assert document["totals"]["hidden_by_reruns"] == 1


def test_strict_reruns_fails_the_run_also_under_xdist(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(FLAKY_RACE)
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "rerunfailures", "-p", "xdist", "-n", "2",
        "--startup-guard-strict-reruns", "--startup-guard-report=report.json",
    )  # fmt: skip
    assert outcomes(result) == dict(passed=2, rerun=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = section(result)
    assert (
        lines[2].startswith("PASSED ON RERUN ") and "::test_reads_config: a rerun hid" in lines[2]
    )
    assert lines[-2] == (
        "the run fails: 1 start-up test passed only on a rerun (--startup-guard-strict-reruns)"
    )
    document = json.loads((guard_pytester.path / "report.json").read_text())
    assert (document["exit_status"], document["strict_reruns"]) == (1, True)
    assert document["totals"]["hidden_by_reruns"] == 1


# -- pieces ------------------------------------------------------------------------------------


def test_timeline_rows_marks_and_width() -> None:
    lanes = [
        Lane("race pointer_swap", spans=[(1.0, 2.0, "#")]),
        Lane(
            "server 0 pid 42",
            spans=[(0.0, 3.0, "-")],
            marks=[(0.5, "o"), (1.0, "o"), (1.0, "*"), (3.0, "X")],
        ),
        Lane("a label much longer than the label column", marks=[(4.0, "R")]),
    ]
    text = render(lanes, zero=1.0, title="timeline: 0 = release of the fleet")
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert lines[0] == "timeline: 0 = release of the fleet; one column = 0.0533 s"
    assert lines[1].split() == ["-1.00", "s", "0.00", "s", "1.00", "s", "2.00", "s", "3.00", "s"]
    assert lines[2].replace("+", "-") == " " * 24 + "-" * 76
    assert [i for i, char in enumerate(lines[2]) if char == "+"] == [24, 43, 62, 80, 99]
    cells = [line[24:] for line in lines[3:6]]
    assert cells[0] == " " * 19 + "#" * 20
    assert cells[1] == "-" * 9 + "o" + "-" * 9 + "*" + "-" * 36 + "X"
    assert cells[2] == " " * 75 + "R"
    assert lines[5].startswith("a label much longer th |")
    assert lines[6].startswith("legend: ")


@pytest.mark.parametrize(
    ("nodeid", "attempt", "name"),
    [
        ("tests/test_a.py::test_x[transient-pointer_swap]", 0, "tests_test_a.py__test_x_transient-pointer_swap"),
        ("test_a.py::TestX::test_y[a b/c]", 2, "test_a.py__TestX__test_y_a_b_c-rerun-2"),
    ],
)  # fmt: skip
def test_artifact_folder_names(nodeid: str, attempt: int, name: str) -> None:
    assert folder_name(nodeid, attempt) == name
    long = folder_name("t.py::test_" + "x" * 300, 0)
    assert len(long) == 129 and re.fullmatch(r"t\.py__test_x+-[0-9a-f]{8}", long)


# -- servers that start their own workers ------------------------------------------------------

# A supervisor that starts two workers as ``uvicorn --workers 2`` does, and serves at once (so its
# probe passes whatever its workers do): ``python workers.py PORT``. Both workers read the fake
# cache's config.json (``HF_HUB_CACHE``: the ``hub_cache`` fixture); worker 0 retries until it
# has it and stays up, worker 1 then exits 1 with an OSError naming config.json (and markup).
WORKERS_SERVER = """
import http.server, json, os, subprocess, sys, threading, time

REPO = os.path.join(os.environ["HF_HUB_CACHE"], "models--acme--tiny")
CAUSE = 'config.json of acme/tiny is <stale> & "unusable" (worker 1)'


def read_config():
    with open(os.path.join(REPO, "refs", "main")) as ref:
        commit = ref.read()
    with open(os.path.join(REPO, "snapshots", commit, "config.json")) as handle:
        return json.load(handle)


def worker(index):
    for attempt in range(100 if index == 0 else 1):
        try:
            read_config()
            break
        except OSError:
            time.sleep(0.05)
    if index == 1:
        raise OSError(CAUSE)
    while True:
        time.sleep(1)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


if sys.argv[1] == "worker":
    worker(int(sys.argv[2]))
else:
    workers = [
        subprocess.Popen([sys.executable, __file__, "worker", str(index)]) for index in (0, 1)
    ]
    threading.Thread(target=lambda: [w.wait() for w in workers], daemon=True).start()  # reaps
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""
# What worker 1's exception says (the cause the report carries, markup in it).
WORKER_CAUSE = """OSError: config.json of acme/tiny is <stale> & "unusable" (worker 1)"""

WORKERS_TEST = """
import sys
from pytest_startup_guard import ready

def test_a_worker_dies(hub_cache, hub_race, server_fleet):
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    hub_race.arm("pointer_swap", repo, "config.json")
    server_fleet.launch(
        [sys.executable, "workers.py", "{port}"], count=1, timeout=20, ready=ready.http("/"),
        workers=1,
    ).assert_all_ready()
"""


def run_workers_fleet(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """One inner run of ``WORKERS_TEST``: a server whose worker dies while it answers its probe."""
    pytester.makepyfile(workers=WORKERS_SERVER, test_workers=WORKERS_TEST)
    return pytester.runpytest_subprocess(
        "-p", "startup_guard", "--startup-guard-seed=13", "--startup-guard-report=report.json",
        *args,
    )  # fmt: skip


def test_a_server_whose_worker_died_did_not_absorb_the_race(
    guard_pytester: pytest.Pytester,
) -> None:
    """uvicorn --workers N and a race that kills one worker: the supervisor answers its probe,
    but its start-up failed. The report says which worker died, how and why; it never says the
    server absorbed the race, and the dead worker's row ends with the mark of its end."""
    result = run_workers_fleet(guard_pytester, "--startup-guard-html=report.html")
    result.assert_outcomes(failed=1)
    document = json.loads((guard_pytester.path / "report.json").read_text())
    assert validate(document) == []
    (test,) = document["tests"]
    (fleet,) = test["fleets"]
    (server,) = fleet["servers"]
    assert server["ready"] and server["hits"] > 0, server
    assert (server["started_up"], server["absorbed"]) == (False, False)
    assert test["absorbed"] == {"servers": 0, "hits": 0}
    assert document["totals"]["absorbed_servers"] == 0
    workers = server["workers"]
    assert len(workers) == 2 and {w["ppid"] for w in workers} == {server["pid"]}
    assert {w["role"] for w in workers} == {"worker"} and all(w["startup_work"] for w in workers)
    (dead,) = [w for w in workers if w["failed"]]
    assert (dead["exit_code"], dead["cause"]) == (1, WORKER_CAUSE)
    assert dead["known_from"] in ("reaped", "bye")
    assert dead["started"] <= dead["ended"] and fleet["released"] <= dead["ended"]
    assert fleet["stopped"] is not None and dead["ended"] < fleet["stopped"]
    (alive,) = [w for w in workers if not w["failed"]]
    assert alive["ended"] is None or alive["ended"] >= fleet["stopped"]  # its fleet's stop ended it
    assert "server 0" in {p["member"] for p in test["processes"] if p["pid"] == dead["pid"]}
    # The summary names the dead worker, its code and its cause under the fleet's line.
    lines = section(result)
    assert "absorbed a race" not in "\n".join(lines)
    assert "; 1 worker failed" in lines[1], lines[1]
    assert lines[2] == "FAILED test_workers.py::test_a_worker_dies"
    fleet_line = next(i for i, line in enumerate(lines) if line.startswith("  fleet 1: "))
    assert lines[fleet_line].endswith(", 0 started up"), lines[fleet_line]
    assert lines[fleet_line + 1] == (
        f"    server 0: worker pid {dead['pid']} exited with code 1 ({WORKER_CAUSE})"
    )
    # The text timeline in the failure message: the dead worker's row ends with F.
    timeline = next(
        line for line in result.outlines if re.match(rf"  child pid {dead['pid']} +\|", line)
    )
    assert timeline.rstrip().endswith("F"), timeline
    # The HTML report: the end mark, red, with the cause escaped in its hover text.
    page = (guard_pytester.path / "report.html").read_text()
    marks = re.findall(
        rf'<g class="sg-mark sg-end sg-end-failed"[^>]* data-pid="{dead["pid"]}"[^>]*>'
        r"<title>([^<]*)</title>",
        page,
    )
    assert len(marks) == 1, marks
    assert "exited with code 1" in marks[0]
    assert "&lt;stale&gt; &amp; &quot;unusable&quot;" in marks[0]
    assert "<stale>" not in page


def fake_server(workers: list[Worker], *, ready: bool = True, **fields: Any) -> Any:
    """A ``Server`` whose child runtime knows ``workers`` (and one hit), and its fleet."""
    from pytest_startup_guard.fleet.server import Server

    server = Server(0, 100, None, ["serve"], Path("/nonexistent"), state="ready", ready=ready,
                    seconds_to_ready=0.5, member="fleet1:0", **fields)  # fmt: skip
    server.hits_of = lambda server: [object()]  # type: ignore[assignment, list-item]
    server.workers_of = lambda server: workers

    class Fleet:
        def members_pids(self, server: Server) -> set[int]:
            return {100, *(worker.pid for worker in workers)}

    return server, Fleet()


def worker(pid: int, ended: float | None, code: int | None, **fields: Any) -> Worker:
    from pytest_startup_guard.fleet.workers import Worker

    values: dict[str, Any] = dict(
        pid=pid, ppid=100, role="worker", argv=("python", "w.py"), started_t=10.1,
        startup_work=True, first_access_t=10.2, last_access_t=10.2, ended_t=ended,
        exit_code=code, known_from="reaped" if code is not None else "", cause=None,
    )  # fmt: skip
    values.update(fields)
    return Worker(**values)


def test_server_facts_judge_every_worker_and_absorb_only_a_start_up() -> None:
    """Built from ``Worker`` objects: a failed worker, one its fleet's stop ended, one still
    running, one that ended without a word; ``absorbed`` needs ``started_up``."""
    record = StartupRecord(origin=10.0)
    failed = worker(201, 10.4, 3, cause="OSError: [Errno 2] No such file: 'config.json'")
    stopped = worker(202, 12.5, -15)
    running = worker(203, None, None)
    server, fleet = fake_server([failed, stopped, running], released_t=10.05, stopped_t=12.0)
    facts = server_facts(record, fleet, server)
    assert (facts["ready"], facts["started_up"], facts["absorbed"]) == (True, False, False)
    assert facts["died_after_ready"] is None
    assert facts["workers"][0] == {
        "pid": 201, "ppid": 100, "role": "worker", "started": pytest.approx(0.1),
        "startup_work": True, "ended": pytest.approx(0.4), "exit_code": 3,
        "known_from": "reaped", "cause": "OSError: [Errno 2] No such file: 'config.json'",
        "failed": True,
    }  # fmt: skip
    assert [w["failed"] for w in facts["workers"]] == [True, False, False]
    assert facts["workers"][2]["ended"] is None and "output_tail" in facts
    # Every worker up, or stopped by the fleet: the race was absorbed.
    server, fleet = fake_server([stopped, running], released_t=10.05, stopped_t=12.0)
    facts = server_facts(record, fleet, server)
    assert (facts["started_up"], facts["absorbed"]) == (True, True)
    assert "output_tail" not in facts
    # A member that died after it was ready did not start up, whatever its workers did.
    server, fleet = fake_server([running], died_after_ready=0.25, returncode=3)
    facts = server_facts(record, fleet, server)
    assert (facts["started_up"], facts["absorbed"], facts["died_after_ready"]) == (
        False, False, 0.25,
    )  # fmt: skip
    assert words.server_problems(facts) == ["was ready, then exited with code 3 0.25 s later"]


def test_worker_words_name_the_code_the_signal_or_no_word() -> None:
    base = {"pid": 7, "role": "worker", "ended": 1.0, "cause": None}
    assert words.worker_words({**base, "exit_code": 3, "cause": "OSError: x"}) == (
        "worker pid 7 exited with code 3 (OSError: x)"
    )
    assert words.worker_words({**base, "exit_code": -9}) == "worker pid 7 killed by SIGKILL"
    assert words.worker_words({**base, "exit_code": None}) == "worker pid 7 ended without a word"
    assert words.worker_words({**base, "ended": None, "exit_code": None}) == "worker pid 7 running"
    assert [words.worker_end_mark({"exit_code": c}) for c in (1, -15, None)] == [
        "code 1", "SIGTERM", "no word",
    ]  # fmt: skip
    server = {"died_after_ready": None, "workers": [{**base, "exit_code": 0, "failed": False}]}
    assert words.server_problems(server) == []
