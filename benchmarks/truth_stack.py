"""The plugin's verdicts on the example model stack against the servers' own truth: ``measure``.

Every case is a test of a generated file, run as users run it (``pytest -p startup_guard``,
``-n 2``, the JSON report): ``examples/model_stack.py`` launches the stack (two processes, or
``uvicorn --workers 2``), naive or retrying, on the tiny model of ``examples/tiny_model.py``
(one weights file, or two shards), under a ``startup_races`` case on one file of the repo.

The truth is the servers' own account, never the plugin's: each process appends to a log of
its case (``$LOAD_LOG``) a line per load error it met, with the file, then ``loaded`` or
``failed to load``; each member's exit code is taken by the test right after its check. A case
is then:

- transient: ``survived`` when each of the 2 processes met the change (said a load error) and
  lived (loaded, and its member did not exit); ``died`` when a process failed, exited, or never
  said it loaded; ``unmet`` when every process lived but some never met the change;
- corrupt: ``closed`` when each process failed (none loaded); ``open`` when one came up.

and the plugin's verdict (the test passed or failed) is counted against it: a **false green**
is a pass where a process died (transient) or came up (corrupt); a **vacuous green** a pass
where some process never met the change; a **false red** a failure where every process met
the change and lived, or where every process failed closed on a corruption.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))

from tiny_model import SHARDS, SINGLE_WEIGHTS  # noqa: E402

RACES = ("pointer_swap", "ref_rewrite", "blob_rewrite", "dangling_pointer")
# lock_held is left out: the stack reads the cache offline, and an offline reader never takes
# a download lock, so no process of it can meet a held lock (every case would be "unmet").
CORRUPTIONS = ("empty", "truncated", "missing_blob")
FILES = ("config.json", "tokenizer.json", SINGLE_WEIGHTS, SHARDS[1])
PROCESSES = 2  # per case: two single-process members, or two uvicorn workers

TEST_FILE = """
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, {examples!r})
from model_stack import REPO, launch_stack
from tiny_model import SHARDS, add_tiny_model

LOGS = Path({logs!r})


@pytest.mark.startup_races(transient={races!r}, corrupt={corruptions!r})
@pytest.mark.parametrize("filename", {files!r})
@pytest.mark.parametrize("policy", {policies!r})
@pytest.mark.parametrize("topology", {topologies!r})
def test_stack(startup_case, hub_cache, server_fleet, tmp_path, request, filename, policy, topology):
    name = re.sub(r"[^\\w.-]", "_", request.node.name)
    sharded = filename in SHARDS
    (LOGS / (name + ".case.json")).write_text(json.dumps(
        {{"filename": filename, "policy": policy, "topology": topology}}))
    repo = add_tiny_model(hub_cache, REPO, tmp_path, sharded=sharded)
    startup_case.apply(repo, filename)
    fleet = launch_stack(
        server_fleet, policy, topology, sharded=sharded, load_log=LOGS / (name + ".log")
    )
    try:
        startup_case.check(fleet)
    finally:
        exits = {{server.pid: server.returncode for server in fleet.servers}}
        (LOGS / (name + ".exits.json")).write_text(json.dumps(exits))
"""

LINE = re.compile(r"^pid (\d+): (?:load error on (\S+): (\w+)|(loaded) |(failed to load) )")


@dataclass
class Account:
    """One process's own account of its start-up."""

    errors: list[str] = field(default_factory=list)  # "FILE: TYPE" of each load error met
    loaded: bool = False
    failed: bool = False


@dataclass
class Case:
    """One case: what was raced, the plugin's verdict, and the processes' truth."""

    name: str
    kind: str  # transient or corrupt
    what: str  # the race or corruption
    filename: str
    policy: str
    topology: str
    plugin_passed: bool
    accounts: dict[int, Account]
    member_exits: dict[int, int | None]
    failure: str = ""
    hits: list[str] = field(default_factory=list)  # the plugin's account: "pid OP FILE"

    @property
    def truth(self) -> str:
        """The servers' own account of the case, in one word."""
        accounts = list(self.accounts.values())
        lived = [a.loaded and not a.failed for a in accounts]
        # A member that exited (single topology: the member is the process) did not live.
        exited = [
            code is not None for pid, code in self.member_exits.items() if pid in self.accounts
        ]
        if self.kind == "corrupt":
            return "open" if any(lived) else "closed"
        if len(accounts) < PROCESSES or not all(lived) or any(exited):
            return "died"
        return "survived" if all(a.errors for a in accounts) else "unmet"

    @property
    def judgement(self) -> str:
        """agree, false green, vacuous green or false red."""
        truth = self.truth
        if self.plugin_passed:
            return {"died": "false green", "open": "false green", "unmet": "vacuous green"}.get(
                truth, "agree"
            )
        return "false red" if truth in ("survived", "closed") else "agree"

    def accounts_in_words(self) -> str:
        said = []
        for pid, account in sorted(self.accounts.items()):
            end = "loaded" if account.loaded and not account.failed else "failed"
            errors = ", ".join(account.errors[:3]) or "no load error"
            said.append(f"pid {pid}: {errors}; {end}")
        return "; ".join(said) or "no process said anything"


def accounts_of(log: Path) -> dict[int, Account]:
    accounts: dict[int, Account] = {}
    text = log.read_text() if log.exists() else ""
    for line in text.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        account = accounts.setdefault(int(match.group(1)), Account())
        if match.group(2):
            account.errors.append(f"{match.group(2)}: {match.group(3)}")
        account.loaded |= bool(match.group(4))
        account.failed |= bool(match.group(5))
    return accounts


def write_test_file(folder: Path, logs: Path, matrix: dict[str, tuple[str, ...]]) -> Path:
    path = folder / "test_truth_stack.py"
    path.write_text(
        TEST_FILE.format(
            examples=str(EXAMPLES),
            logs=str(logs),
            races=list(matrix["races"]),
            corruptions=list(matrix["corruptions"]),
            files=list(matrix["files"]),
            policies=list(matrix["policies"]),
            topologies=list(matrix["topologies"]),
        )
    )
    return path


def run_cases(folder: Path, matrix: dict[str, tuple[str, ...]], seed: int) -> list[Case]:
    """Run the matrix as one pytest run (``-n 2``) and read back each case."""
    logs = folder / "logs"
    logs.mkdir()
    test_file = write_test_file(folder, logs, matrix)
    report = folder / "report.json"
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "startup_guard",
            "-p",
            "xdist",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
            "-q",
            "--tb=line",
            f"--startup-guard-seed={seed}",
            f"--startup-guard-report={report}",
            f"--basetemp={folder / 'tmp'}",
            str(test_file),
        ],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        timeout=3600,
    )
    tests = json.loads(report.read_text())["tests"] if report.exists() else []
    return [case_of(test, logs) for test in tests]


def case_of(test: dict[str, Any], logs: Path) -> Case:
    name = re.sub(r"[^\w.-]", "_", test["nodeid"].rsplit("::", 1)[-1])
    params = json.loads((logs / f"{name}.case.json").read_text())
    exits_file = logs / f"{name}.exits.json"
    exits = json.loads(exits_file.read_text()) if exits_file.exists() else {}
    verdict = test.get("verdict") or {}
    failure = ""
    for attempt in test.get("attempts") or ():
        failure = failure or (attempt.get("failure") or "")
    hits = [
        f"pid {hit['pid']} {hit['op']} {Path(hit['path']).name}"
        for race in test.get("races") or ()
        for hit in race["hits"]
    ]
    return Case(
        name=name,
        kind=str(verdict.get("kind", "?")),
        what=str(verdict.get("name", "?")),
        filename=params["filename"],
        policy=params["policy"],
        topology=params["topology"],
        plugin_passed=test["outcome"] == "passed",
        accounts=accounts_of(logs / f"{name}.log"),
        member_exits={int(pid): code for pid, code in exits.items()},
        failure=failure,
        hits=sorted(set(hits)),
    )


def full_matrix() -> dict[str, tuple[str, ...]]:
    return {
        "races": RACES,
        "corruptions": CORRUPTIONS,
        "files": FILES,
        "policies": ("naive", "retry"),
        "topologies": ("single", "workers"),
    }


def quick_matrix() -> dict[str, tuple[str, ...]]:
    return {
        "races": ("pointer_swap",),
        "corruptions": ("truncated",),
        "files": (SINGLE_WEIGHTS,),
        "policies": ("naive", "retry"),
        "topologies": ("single",),
    }


def measure(quick: bool, seed: int = 40) -> dict[str, Any]:
    """Run the cases; the counts of each judgement and truth, and every case that disagrees
    with both accounts."""
    matrix = quick_matrix() if quick else full_matrix()
    with tempfile.TemporaryDirectory(prefix="truth-stack-") as scratch:
        cases = run_cases(Path(scratch), matrix, seed)
        keep = os.environ.get("TRUTH_KEEP")  # a folder for the logs and the report, to look into
        if keep:
            shutil.copytree(Path(scratch) / "logs", Path(keep) / "logs", dirs_exist_ok=True)
            if (Path(scratch) / "report.json").exists():
                shutil.copy(Path(scratch) / "report.json", Path(keep) / "report.json")
    judgements = Counter(case.judgement for case in cases)
    findings = [
        {
            "case": case.name,
            "judgement": case.judgement,
            "truth": case.truth,
            "plugin": "passed" if case.plugin_passed else "failed",
            "servers said": case.accounts_in_words(),
            "member exits": case.member_exits,
            "plugin's hits": case.hits[:8],
            "plugin's failure": case.failure[:600],
        }
        for case in cases
        if case.judgement != "agree"
    ]
    return {
        "cases": len(cases),
        "expected_cases": expected_cases(matrix),
        "judgements": dict(judgements),
        "truths": dict(Counter(f"{case.kind} {case.truth}" for case in cases)),
        "plugin_passed": sum(case.plugin_passed for case in cases),
        "findings": findings,
    }


def expected_cases(matrix: dict[str, tuple[str, ...]]) -> int:
    kinds = len(matrix["races"]) + len(matrix["corruptions"])
    return kinds * len(matrix["files"]) * len(matrix["policies"]) * len(matrix["topologies"])


if __name__ == "__main__":
    print(json.dumps(measure("--quick" in sys.argv), indent=2))
