"""``startup-guard-report merge`` on files that are not what it wrote: one error line each.

Every report it is given is read as something that may come from anywhere: a regular file only
(a FIFO, a folder, a device are refused without blocking), bounded in size and depth, strict
JSON, and checked against report-schema.json before any field is read. Each failure is one
``startup-guard-report: error:`` line naming the file and the field, exit status 2, no
traceback, no hang. The report edited here is real: one run of test_merge.py's suite.

``schema_check`` (the plugin's own check of the schema's subset, since ``jsonschema`` is not a
dependency of the plugin) is checked against ``jsonschema`` on the same edited reports.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from report_schema import validate, validator
from test_merge import STUB, SUITE
from user_env import user_env

from pytest_startup_guard.report import read_json as read_json_module
from pytest_startup_guard.report.cli import main
from pytest_startup_guard.report.merge import SCHEMA_FILE
from pytest_startup_guard.report.schema_check import KEYWORDS, first_problem

ERROR = "startup-guard-report: error: "


@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real report (cpu): tests with races, fleets, verdicts and a failure."""
    folder = tmp_path_factory.mktemp("real-report")
    (folder / "test_matrix.py").write_text(SUITE)
    (folder / "stub.py").write_text(STUB)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "rerunfailures",
         "--startup-target=cpu", "--startup-guard-report=report.json", "test_matrix.py"],
        cwd=folder, env={**user_env(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    document: dict[str, Any] = json.loads((folder / "report.json").read_text())
    assert not validate(document)
    assert any(test["fleets"] for test in document["tests"])
    return document


def run(folder: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``startup-guard-report ARGS`` as a user runs it; a hang fails the test, not the suite."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_startup_guard.report.cli", *map(str, args)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def assert_one_error(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit status 2, nothing on stdout, one error line saying ``words``, no traceback."""
    assert (result.returncode, result.stdout) == (2, ""), result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def edit(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``document`` with the field at JSON pointer ``path`` set to ``value``."""
    changed = copy.deepcopy(document)
    *parents, last = [int(part) if part.isdigit() else part for part in path.split("/")[1:]]
    target: Any = changed
    for part in parents:
        target = target[part]
    target[last] = value
    return changed


def first_with(document: dict[str, Any], field: str) -> int:
    """The index of the first test whose ``field`` is not empty."""
    return next(i for i, test in enumerate(document["tests"]) if test[field])


# Fields of the wrong type, each of which a reader of the report would trip on.
WRONG_FIELDS: list[tuple[str, Callable[[dict[str, Any]], str], Any, str]] = [
    ("tests_not_a_list", lambda d: "/tests", {"a": 1}, "expected a list"),
    ("test_not_an_object", lambda d: "/tests/0", "test_x", "expected an object"),
    ("nodeid_a_number", lambda d: "/tests/0/nodeid", 7, "expected a string"),
    ("outcome_unknown", lambda d: "/tests/0/outcome", "great", "expected one of"),
    ("reruns_text", lambda d: "/tests/0/reruns", "two", "expected an integer >= 0"),
    ("reruns_negative", lambda d: "/tests/0/reruns", -1, "expected an integer >= 0"),
    ("hidden_failure_a_list", lambda d: "/tests/0/hidden_failure", [1], "expected null or an"),
    ("verdict_a_string", lambda d: "/tests/0/verdict", "ok", "expected null or an object"),
    ("attempts_of_numbers", lambda d: "/tests/0/attempts", [1, 2], "expected an object"),
    ("totals_a_list", lambda d: "/totals", [], "expected an object"),
    ("totals_tests_text", lambda d: "/totals/tests", "5", "expected an integer >= 0"),
    ("seed_a_float", lambda d: "/seed", 1.5, "expected an integer >= 0"),
    ("target_a_list", lambda d: "/target", ["cpu"], "expected one of"),
    ("extra_field", lambda d: "/unexpected", 1, "not a field of this report"),
    (
        "time_to_ready_text",
        lambda d: f"/tests/{first_with(d, 'fleets')}/time_to_ready",
        "fast",
        "expected null or an object",
    ),
    (
        "time_to_ready_median_text",
        lambda d: f"/tests/{first_with(d, 'fleets')}/time_to_ready/median",
        "1 s",
        "expected a number or null",
    ),
    (
        "fleet_servers_text",
        lambda d: f"/tests/{first_with(d, 'fleets')}/fleets/0/servers",
        "two",
        "expected a list",
    ),
]


@pytest.mark.parametrize(
    ("path_of", "value", "expected"),
    [case[1:] for case in WRONG_FIELDS],
    ids=[case[0] for case in WRONG_FIELDS],
)
def test_a_field_of_the_wrong_type_is_one_error_naming_the_file_and_the_field(
    real_report: dict[str, Any],
    tmp_path: Path,
    path_of: Callable[[dict[str, Any]], str],
    value: Any,
    expected: str,
) -> None:
    field = path_of(real_report)
    (tmp_path / "report-cpu.json").write_text(json.dumps(edit(real_report, field, value)))
    line = assert_one_error(run(tmp_path, "merge", "report-cpu.json"), "report-cpu.json")
    assert f"field {field}" in line and expected in line, line


def test_a_required_field_left_out_is_named(real_report: dict[str, Any], tmp_path: Path) -> None:
    document = copy.deepcopy(real_report)
    del document["tests"][0]["outcome"]
    (tmp_path / "r.json").write_text(json.dumps(document))
    assert_one_error(run(tmp_path, "merge", "r.json"), "r.json", "field /tests/0/outcome: missing")


def test_a_valid_report_still_merges(real_report: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text(json.dumps(real_report))
    result = run(tmp_path, "merge", "r.json")
    assert (result.returncode, result.stderr) == (0, "")
    assert "startup guard: the CI matrix" in result.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "report-cuda.json")  # nobody ever writes into it
    assert_one_error(
        run(tmp_path, "merge", "report-cuda.json"), "report-cuda.json", "FIFO", "not a file"
    )


def test_a_folder_and_a_device_are_refused(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    assert_one_error(run(tmp_path, "merge", "reports"), "cannot read reports", "a folder")
    assert_one_error(run(tmp_path, "merge", "/dev/zero"), "/dev/zero", "character device")


def test_nesting_deeper_than_the_parser_goes_is_an_error_not_a_recursion_error(
    real_report: dict[str, Any], tmp_path: Path
) -> None:
    text = json.dumps(real_report)
    deep = text[:-1] + ', "deep": ' + "[" * 200_000 + "]" * 200_000 + "}"
    (tmp_path / "deep.json").write_text(deep)
    assert_one_error(run(tmp_path, "merge", "deep.json"), "deep.json", "nested deeper than")
    shallow_but_too_deep = edit(real_report, "/tests/0/verdict", json.loads("[" * 70 + "]" * 70))
    (tmp_path / "deep2.json").write_text(json.dumps(shallow_but_too_deep))
    assert_one_error(
        run(tmp_path, "merge", "deep2.json"), "deep2.json", "/tests/0/verdict", "nested deeper"
    )


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(
    real_report: dict[str, Any], tmp_path: Path, constant: str
) -> None:
    text = json.dumps(edit(real_report, "/tests/0/duration", 0.5)).replace("0.5", constant, 1)
    (tmp_path / "r.json").write_text(text)
    assert_one_error(run(tmp_path, "merge", "r.json"), "r.json", "not strict JSON", constant)


def test_a_file_over_the_size_bound_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(read_json_module, "MAX_BYTES", 1000)
    (tmp_path / "big.json").write_text("[" + "0," * 1000 + "0]")
    assert main(["merge", str(tmp_path / "big.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "big.json is too big" in err and "over 1000 bytes" in err


# -- the plugin's check of the schema, against jsonschema ----------------------------------------


def mutations(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The document with each field, in turn, given a value of each other JSON type, and
    each object without each of its fields."""
    others = [None, True, -1, 0.5, "x", [], {}, [{}], 2]

    def walk(value: Any, where: str) -> Iterator[str]:
        yield where
        if isinstance(value, dict):
            for key, item in value.items():
                yield from walk(item, f"{where}/{key}")
        elif isinstance(value, list) and value:
            yield from walk(value[0], f"{where}/0")

    for field in list(walk(document, ""))[1:]:
        for other in others:
            yield f"{field}={other!r}", edit(document, field, other)
        parent, _, last = field.rpartition("/")
        if not last.isdigit():
            without = copy.deepcopy(document)
            target: Any = without
            for part in parent.split("/")[1:]:
                target = target[int(part) if part.isdigit() else part]
            del target[last]
            yield f"{field} left out", without


def test_the_plugins_schema_check_agrees_with_jsonschema(real_report: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    assert first_problem(real_report, schema) is None
    checked = 0
    for name, document in mutations(real_report):
        theirs = ["".join(f"/{part}" for part in error.absolute_path) for error in
                  validator().iter_errors(document)]  # fmt: skip
        ours = first_problem(document, schema)
        assert (ours is None) == (not theirs), (name, ours, theirs[:3])
        if ours is not None:  # the field it names is one jsonschema names, or inside it
            assert any(ours[0].startswith(pointer) for pointer in theirs), (name, ours, theirs)
        checked += 1
    assert checked > 500


def test_every_keyword_of_the_schema_is_one_the_check_knows() -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    used: set[str] = set()

    def walk(value: Any, as_schema: bool) -> None:
        if isinstance(value, dict):
            if as_schema:
                used.update(value)
            for key, item in value.items():
                if key in ("properties", "$defs"):
                    for sub in item.values():
                        walk(sub, True)
                elif key in ("items", "additionalProperties"):
                    walk(item, True)
                elif key == "oneOf":
                    for sub in item:
                        walk(sub, True)
        elif isinstance(value, list):
            for item in value:
                walk(item, as_schema)

    walk(schema, True)
    assert used <= KEYWORDS, used - KEYWORDS


# -- what the plugin writes ----------------------------------------------------------------------


def test_what_the_report_writes_is_strict_json_without_nan_or_infinity(tmp_path: Path) -> None:
    from pytest_startup_guard.report import strict_json
    from pytest_startup_guard.report.artifacts import _write_json

    value = {"t": float("nan"), "times": (1.5, float("inf"), -float("inf")), "nested": [[0.0]]}
    text = strict_json.dumps(value)
    assert json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} written")) == {
        "t": None,
        "times": [1.5, None, None],
        "nested": [[0.0]],
    }
    _write_json(tmp_path / "facts.json", value)  # an artifact's facts
    (tmp_path / "facts.json").rename(tmp_path / "facts.txt")
    assert "NaN" not in (tmp_path / "facts.txt").read_text()
    assert "Infinity" not in (tmp_path / "facts.txt").read_text()
