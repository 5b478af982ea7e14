"""The example model stack under races, as users run it: config, tokenizer and weights.

``examples/model_stack.py`` launches the stack (``examples/servers/model_server.py`` as two
processes, ``model_app.py`` under ``uvicorn --workers 2``) on the tiny model that
``examples/tiny_model.py`` builds; each server knows what it should have loaded and says each
load error it meets, with the file. The verdicts are checked against that: a naive stack dies
of a race on its weights and the case fails naming the weights, with every process having met
the change; a retrying one comes up and passes; a race on one shard of two is met at that
shard only; a file read only in Rust (``tokenizer.json``, by ``tokenizers``) is met with
``native_accesses=True``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SAID_LOAD = re.compile(r"^pid (\d+): (load error on \S+: \w+)")
GAVE_UP = re.compile(r"^pid \d+: failed to load \S+: (load error on \S+: \w+)")

COMMON = f"""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, {str(EXAMPLES)!r})
from model_stack import REPO, launch_stack
from tiny_model import SHARDS, SINGLE_WEIGHTS, add_tiny_model
"""

RACED = """
from common import *

@pytest.mark.startup_races(transient=[{race!r}])
@pytest.mark.parametrize("policy", ["naive", "retry"])
def test_stack(startup_case, hub_cache, server_fleet, tmp_path, policy):
    sharded = {filename!r} in SHARDS
    repo = add_tiny_model(hub_cache, REPO, tmp_path, sharded=sharded)
    startup_case.apply(repo, {filename!r})
    log = Path({logs!r}) / (policy + ".log")
    startup_case.check(
        launch_stack(server_fleet, policy, {topology!r}, sharded=sharded, load_log=log)
    )
"""


@pytest.fixture
def stack_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


def run_raced(
    pytester: pytest.Pytester, race: str, filename: str, topology: str
) -> tuple[pytest.RunResult, dict[str, dict[str, object]]]:
    """The naive and the retrying stack under ``race`` on ``filename``: the run and each
    test's entry of the JSON report, by policy."""
    (pytester.path / "logs").mkdir()
    pytester.makepyfile(
        RACED.format(
            race=race, filename=filename, topology=topology, logs=str(pytester.path / "logs")
        )
    )
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "-p", "startup_guard", "-rA", f"--startup-guard-report={report}"
    )
    tests = json.loads(report.read_text())["tests"]
    return result, {test["nodeid"].rsplit("-", 1)[-1].rstrip("]"): test for test in tests}


def processes_that_met(test: dict[str, object], filename: str) -> set[int]:
    """The pids of the race's hits; every hit must be an access of ``filename``."""
    (race,) = test["races"]  # type: ignore[misc]
    hits = race["hits"]
    assert hits and all(hit["path"].endswith("/" + filename) for hit in hits), hits
    return {hit["pid"] for hit in hits}


def said(test: dict[str, object]) -> list[str]:
    """The load errors the servers that did not start up said they gave up on (the last line
    of each, ``pid N: failed to load MODEL: load error on FILE: TYPE: ...``), once each."""
    reasons = set()
    for fleet in test["fleets"]:  # type: ignore[attr-defined]
        for server in fleet["servers"]:
            for line in (server.get("output_tail") or "").splitlines():
                match = GAVE_UP.match(line)
                if match:
                    reasons.add(match.group(1))
    return sorted(reasons)


def workers_of(test: dict[str, object]) -> set[int]:
    """The pids of the processes that loaded the model: the members, or their workers."""
    pids = set()
    for fleet in test["fleets"]:  # type: ignore[attr-defined]
        for server in fleet["servers"]:
            workers = [w["pid"] for w in server["workers"] if w["startup_work"]]
            pids |= set(workers) if workers else {server["pid"]}
    return pids


@pytest.mark.parametrize("topology", ["single", "workers"])
def test_a_naive_stack_fails_naming_its_weights_and_a_retrying_one_passes(
    stack_pytester: pytest.Pytester, topology: str
) -> None:
    result, tests = run_raced(stack_pytester, "pointer_swap", "model.safetensors", topology)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*PASSED*test_stack*retry*", "*FAILED*test_stack*naive*"])
    failure = tests["naive"]["attempts"][0]["failure"]
    assert "on model.safetensors of acme/stack" in failure, failure
    # The servers' own account: each process died of the weights, as it said itself.
    assert said(tests["naive"]) == ["load error on model.safetensors: LocalEntryNotFoundError"]
    for policy in ("naive", "retry"):
        # Every process that loaded met the change: two members, or two workers of one.
        met = processes_that_met(tests[policy], "model.safetensors")
        assert met == workers_of(tests[policy]) and len(met) == 2, (policy, met)
    assert tests["retry"]["absorbed"]["servers"] == (2 if topology == "single" else 1)
    # ... and by their own account each retrying process met the change and came up.
    met = accounts(stack_pytester, "retry")
    for pid in workers_of(tests["retry"]):
        assert any(e.startswith("load error on model.safetensors") for e in met.get(pid, ())), met


def test_one_shard_of_two_is_met_at_that_shard(stack_pytester: pytest.Pytester) -> None:
    shard = "model-00002-of-00002.safetensors"
    result, tests = run_raced(stack_pytester, "pointer_swap", shard, "single")
    result.assert_outcomes(passed=1, failed=1)
    failure = tests["naive"]["attempts"][0]["failure"]
    assert f"on {shard} of acme/stack" in failure, failure
    assert said(tests["naive"]) == [f"load error on {shard}: LocalEntryNotFoundError"]
    for policy in ("naive", "retry"):
        assert len(processes_that_met(tests[policy], shard)) == 2, policy


class VacuousGreen(AssertionError):
    """The plugin passed a case in which a process never met the change, by its own account."""


def accounts(pytester: pytest.Pytester, policy: str) -> dict[int, list[str]]:
    """What each process of a policy's test said it met: its load errors, by pid (each server
    appends its own lines to the test's log, ``$LOAD_LOG``)."""
    met: dict[int, list[str]] = {}
    log = pytester.path / "logs" / f"{policy}.log"
    for line in log.read_text().splitlines() if log.exists() else ():
        match = SAID_LOAD.match(line)
        if match:
            met.setdefault(int(match.group(1)), []).append(match.group(2))
    return met


def test_a_file_read_only_in_rust_is_met_with_native_accesses(
    stack_pytester: pytest.Pytester,
) -> None:
    """``blob_rewrite`` cuts the blob of ``tokenizer.json`` short: only ``tokenizers`` (Rust)
    reads its bytes, seen with ``native_accesses=True``. A green case needs each process to have
    met the short blob (said a load error on tokenizer.json) and come up: the naive stack dies
    of it (red); the retrying one absorbs it."""
    result, tests = run_raced(stack_pytester, "blob_rewrite", "tokenizer.json", "single")
    for policy, test in tests.items():
        met = accounts(stack_pytester, policy)
        unmet = [
            pid
            for pid in workers_of(test)
            if not any("tokenizer.json" in e for e in met.get(pid, ()))
        ]
        if test["outcome"] == "passed" and unmet:
            raise VacuousGreen(f"{policy}: pids {unmet} never met it ({met}); {test['races']}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*PASSED*test_stack*retry*"])


MISSING_BLOB = """
from common import *

@pytest.mark.startup_races(corrupt=["missing_blob"])
def test_stack(startup_case, hub_cache, server_fleet, tmp_path):
    repo = add_tiny_model(hub_cache, REPO, tmp_path)
    startup_case.apply(repo, "config.json")
    startup_case.check(launch_stack(server_fleet, "naive", "workers"))
"""


class FalseRed(AssertionError):
    """The plugin failed a case that the servers' own account says held."""


def test_workers_that_fail_closed_on_a_missing_blob_pass_whatever_the_supervisor_exits_with(
    stack_pytester: pytest.Pytester,
) -> None:
    """Both uvicorn workers meet the missing blob of config.json (its pointer dangles), each
    says so and exits 3, and uvicorn's supervisor exits 0: the workers failed closed."""
    stack_pytester.makepyfile(MISSING_BLOB)
    report = stack_pytester.path / "report.json"
    result = stack_pytester.runpytest_subprocess(
        "-p", "startup_guard", f"--startup-guard-report={report}"
    )
    (test,) = json.loads(report.read_text())["tests"]
    # The servers' own account first: every worker failed on config.json.
    (server,) = test["fleets"][0]["servers"]
    assert [w["exit_code"] for w in server["workers"] if w["startup_work"]] == [3, 3], server
    assert said(test) == ["load error on config.json: OSError"], server["output_tail"]
    if result.parseoutcomes().get("passed") != 1:
        raise FalseRed(result.stdout.str())
