"""``make demo``: run the bundled examples with the plugin and print what it caught.

1. the bug zoo (``test_zoo.py``): four server policies, each started as a fleet on a shared
   fake cache, under transient races and persistent corruptions; a table of server x case with
   the expected and the observed verdict;
2. the fake cache: what the real transformers raises on each corruption;
3. beyond the hub cache (``test_shared_faults.py``) and the public incidents
   (``test_incident_*.py``): a shared compile cache under each generic race, a build lock a
   dead process left, the fleet's ports taken or shared, ports a server picks itself stolen,
   file-system errors and a network file system, two members in an order that breaks them, a
   head that listens late, locks held or not exclusive, corrupt cache entries that must be
   rebuilt and a native build step raced, each on a server that handles it and one that does
   not;
4. every access point of the example server's start-up raced (``test_explore.py``);
5. a test author's own race and the in-process verdicts;
6. the import-race probe, the background-import scan and the start-method checks;
7. a supervisor that hides a dead worker (``test_workers.py``): ``uvicorn --workers 2`` behind a
   TCP probe, its naive workers under a deterministic race and the ones that retry;
8. a cold-cache fleet (``test_cold_start.py``): 4 members download one model at once from a hub
   on loopback, on an empty cache and on a warm one, per download policy;
9. a model stack racing its weights (``test_model_stack.py``): config, tokenizer and weights
   loaded at start-up, naive and retrying, as 2 processes and under ``uvicorn --workers 2``.

Exits non-zero only when an observed verdict differs from the expected one. The full matrix
(every race, every corruption, both loaders) runs in ``make test``.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import faults  # noqa: E402
from zoo import POLICIES, expected, reason  # noqa: E402

ZOO_CASES = "autoconfig and (transient-pointer_swap or transient-ref_rewrite or corrupt-empty- or corrupt-no_model_type)"
CASE_ID = re.compile(r"test_startup\[(transient|corrupt)-(\w+?)-(\w+)-(autoconfig|hub_json)\]")
WORKERS_ID = re.compile(r"\[transient-(\w+)-(naive|retry)\]")
WORKERS_EXPECTED = {"naive": "fail", "retry": "pass"}
# The naive workers die of the race on config.json (lifespan start-up failed: exit code 3) while
# uvicorn's supervisor exits 0; the retrying ones absorb it. Not a missing uvicorn, not an
# ImportError: the reason must be this one.
WORKERS_REASON = {
    "naive": (
        r"server 0 exited with code 0, 2 of 2 workers failed with code 3, [1-9]\d* hits?: "
        r".*FileNotFoundError: .*config\.json",
        r"hit [1-9]\d*x on config\.json",
    ),
    "retry": (r"^1 of 1 up", r"hit [1-9]\d*x on config\.json", r"1 absorbed it"),
}
STACK_ID = re.compile(r"test_weights_raced\[transient-(\w+)-(naive|retry)-(single|workers)\]")
STACK_CASES = "test_weights_raced"
STACK_EXPECTED = {"naive": "fail", "retry": "pass"}
# (policy, topology) -> its reason: each process met the swap of the weights' pointer (the
# last file it loads); the naive ones died of it, saying so (their own "load error on" line),
# the retrying ones absorbed it. Not a missing library, not the config or the tokenizer.
_WEIGHTS_MET = (r"pointer_swap hit [1-9]\d*x on model\.safetensors", r"met by 2 processes")
_WEIGHTS_SAID = r"said: load error on model\.safetensors: LocalEntryNotFoundError"
STACK_REASON = {
    ("naive", "single"): (
        r"(?:^|; )0 of 2 up",
        r"server [01] exited with code 1, [1-9]\d* hits?: LocalEntryNotFoundError: ",
        *_WEIGHTS_MET,
        _WEIGHTS_SAID,
    ),
    ("naive", "workers"): (
        r"(?:^|; )0 of 1 up",
        r"server 0 exited with code 0, 2 of 2 workers failed with code 3, [1-9]\d* hits?: "
        r"LocalEntryNotFoundError: ",
        *_WEIGHTS_MET,
        _WEIGHTS_SAID,
    ),
    ("retry", "single"): (r"(?:^|; )2 of 2 up", *_WEIGHTS_MET, r"2 absorbed it"),
    ("retry", "workers"): (r"(?:^|; )1 of 1 up", *_WEIGHTS_MET, r"1 absorbed it"),
}
SAID = re.compile(r"^pid \d+: (?:failed to load \S+: )?(load error on \S+: \w+)")
COLD_ID = re.compile(r"test_(cold|warm)_cache\[(\w+)\]")
# Every policy on a cold cache, and the naive one on a warm cache, where it passes: a warm-cache
# test never sees its bug. (The warm every and rank0 cases pass too: make test runs them.)
COLD_CASES = "test_cold_cache or naive"
COLD_POLICIES = ("every", "rank0", "naive", "?")
COLD_EXPECTED = {("cold", "naive"): "fail"}  # every other (cache, policy): "pass"
# (cache, policy) -> its reason: the naive members read a cold cache at once and give up.
COLD_REASON = {
    ("cold", "naive"): (
        r"server [1-3] exited with code 1: (?:LocalEntryNotFoundError|IncompleteSnapshotError): ",
        r"^[1-3] of 4 up",
    ),
    ("cold", "every"): (r"^4 of 4 up", r"4/4 ready, [1-9]\d* requests served, 4 blobs for 4 files"),
    ("cold", "rank0"): (r"^4 of 4 up", r"4/4 ready, [1-9]\d* requests served, 4 blobs for 4 files"),
    ("warm", "naive"): (r"^4 of 4 up", r"4/4 ready, 1 requests? served, 4 blobs for 4 files"),
}
# What transformers raised on each corruption of the fake cache (test_fake_cache.py).
_NOT_JSON = r"^OSError: It looks like the config file at .*config\.json' is not"
_NOT_CACHED = r"^OSError: We couldn't connect to 'https://huggingface\.co'"
_NO_TYPE = r"^ValueError: Unrecognized model in acme/tiny"
CACHE_REASON = {
    "binary": _NOT_JSON, "empty": _NOT_JSON, "not_json": _NOT_JSON, "truncated": _NOT_JSON,
    "dangling_pointer": _NOT_CACHED, "empty_ref": _NOT_CACHED, "missing_blob": _NOT_CACHED,
    "missing_pointer": _NOT_CACHED, "no_exist": _NO_TYPE, "no_model_type": _NO_TYPE,
}  # fmt: skip
CACHE_ID = re.compile(r"test_corrupt_config_fails_closed\[(\w+)\]")
# Each explored start-up: the naive server fails at every access point, the retrying one survives.
EXPLORE_REASON = {
    "test_every_access_point[naive]": r"explored pointer_swap: 3 points: 0 survived, 3 failed",
    "test_every_access_point[retry]": r"explored pointer_swap: 3 points: 3 survived, 0 failed",
    "test_retry_survives_every_access_point[transient-pointer_swap]": r"explored pointer_swap: 3 points: 3 survived, 0 failed.*expected to survive: held",
    "test_retry_survives_every_access_point[transient-ref_rewrite]": r"explored ref_rewrite: 3 points: 3 survived, 0 failed.*expected to survive: held",
}
OWN_REASON = {
    "test_retry_survives_a_snapshot_resync": r"snapshot_resync hit [1-9]\d*x on config\.json",
    "test_a_loader_without_retry_does_not": r"snapshot_resync hit [1-9]\d*x on config\.json",
    "test_retry_still_fails_closed_on_a_corrupt_config": r"",
}
# The import checks: the failing examples run with --runxfail, each must fail for its reason.
IMPORTS_REASON = {
    "test_transformers_is_not_either": r"importing 'transformers' from a background thread is not safe",
    "test_lazy_swap_library_is_not": r"importing 'lazy_swap_lib' from a background thread is not safe",
    "test_bad_warmup_imports_in_a_thread_under_suppress": r"imports run in background threads",
    "test_unguarded_set_start_method": r"the start-up does not start under every start method",
    "test_start_up_that_needs_fork": r"the start-up does not start under every start method",
    "test_variable_that_still_takes_forkserver": r"ACME_START_METHOD's documented choices and the code that reads it disagree",
}
WIDTH = 150  # of the why column


@dataclass(frozen=True)
class Row:
    """One test of an inner pytest run: its outcome and what it left to judge its reason by."""

    name: str
    outcome: str  # pass, fail, error, xfail, skipped
    detail: str = ""  # the failure's first problem line
    caught: str = ""  # the test's "caught" property
    text: str = ""  # the whole failure text
    facts: dict[str, Any] = field(default_factory=dict)  # its entry of the JSON report


def run_pytest(seed: int, workdir: Path, name: str, *args: str) -> list[Row]:
    """Run pytest with the plugin on the examples; one ``Row`` per test, with its entry of the
    JSON report (``--startup-guard-report``) where it is a start-up test."""
    junit, report = workdir / f"{name}.xml", workdir / f"{name}.json"
    command = [
        sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "no:cacheprovider", "-q",
        f"--startup-guard-seed={seed}", f"--junitxml={junit}", "-o", "junit_family=legacy",
        f"--basetemp={workdir / name}", f"--startup-guard-report={report}", *args,
    ]  # fmt: skip
    print("$", " ".join(command[2:]), flush=True)
    subprocess.run(
        command, cwd=HERE, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    facts = {}
    if report.exists():
        for test in json.loads(report.read_text())["tests"]:
            facts[test["nodeid"].rsplit("::", 1)[-1]] = test
    if not junit.exists():
        return []
    return [row_of(case, facts) for case in ET.parse(junit).getroot().iter("testcase")]


def row_of(case: ET.Element, facts: dict[str, dict[str, Any]]) -> Row:
    name = case.get("name", "")
    outcome, detail, text = "pass", "", ""
    for tag in ("failure", "error"):
        element = case.find(tag)
        if element is not None:
            outcome = "fail" if tag == "failure" else "error"
            text = element.get("message", "") + "\n" + (element.text or "")
            # "  - problem" lines; in a long message junit keeps them in the traceback only
            lines = [re.sub(r"^E\s+", "", line.strip()) for line in text.splitlines()]
            problems = [line[2:] for line in lines if line.startswith("- ")]
            firsts = text.strip().splitlines()
            detail = problems[0] if problems else firsts[0] if firsts else ""
    skipped = case.find("skipped")
    if skipped is not None:
        xfail = skipped.get("type") == "pytest.xfail"
        outcome, detail = ("xfail", skipped.get("message", "")) if xfail else ("skipped", "")
    caught = {p.get("name"): p.get("value") for p in case.iter("property")}.get("caught", "")
    return Row(name, outcome, detail, caught or "", text, facts.get(name, {}))


PATH = re.compile(r"(?<![\w.])/(?:[^\s'\"/]+/)+(?=[^\s'\"/]+/[^\s'\"/(),:]+)")
EXCEPTION = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit|Interrupt)): ?(.*)$")
TOOL_ERROR = re.compile(r"^\S+: (?:fatal )?error: ")


def short(text: str) -> str:
    """A path in a message by its last two parts: what a reader needs to see."""
    return PATH.sub("…/", text)


def exception_of(server: dict[str, Any]) -> str:
    """The last exception a server's output names with its message, else its workers' first
    cause, else the last error a tool it ran printed (``ninja: error: ...``)."""
    for line in reversed((server.get("output_tail") or "").splitlines()):
        match = EXCEPTION.match(line.strip())
        if match:
            return short(f"{match.group(1)}: {match.group(2)}")
    causes = [worker["cause"] for worker in server.get("workers", ()) if worker.get("cause")]
    if causes:
        return short(causes[0])
    said = [
        line for line in (server.get("output_tail") or "").splitlines() if TOOL_ERROR.search(line)
    ]
    return short(said[-1].strip()) if said else ""


def server_words(server: dict[str, Any]) -> str:
    """What became of a server that did not start up: state, exit code, workers, hits, the
    exception its output ended with and the reason the plugin gave."""
    words = f"server {server['index']} {server['state']}"
    if server["state"] == "exited":
        words += f" with code {server['returncode']}"
    failed = [worker for worker in server.get("workers", ()) if worker.get("failed")]
    if failed:
        codes = "/".join(sorted({str(worker["exit_code"]) for worker in failed}))
        words += f", {len(failed)} of {len(server['workers'])} workers failed with code {codes}"
    if server["hits"]:
        words += f", {server['hits']} hit{'s' if server['hits'] != 1 else ''}"
    for said in (exception_of(server), short(server.get("reason") or "")):
        if said:
            words += f": {said}"
    return words


def observed(row: Row) -> str:
    """The reason a row shows, in words, from its JSON report entry, its ``caught`` property and
    its failure: how many servers started up and what became of the first that did not; each
    race and what it hit, the servers that absorbed it; faults met; the verdict; the failure."""
    facts, parts = row.facts, []
    servers = [server for fleet in facts.get("fleets", ()) for server in fleet["servers"]]
    if servers:
        down = [server for server in servers if not server["started_up"]]
        parts.append(f"{len(servers) - len(down)} of {len(servers)} up")
        parts += [server_words(down[0])] if down else []
    for race in facts.get("races", ()):
        parts.append(f"{race['name']} hit {race['hits_total']}x on {race['target']}")
    if (facts.get("absorbed") or {}).get("servers"):
        parts.append(f"{facts['absorbed']['servers']} absorbed it")
    for fleet in facts.get("fleets", ()):
        for fault in fleet["port_faults"]:
            parts.append(f"{fault['kind']} {'met' if fault['met'] else 'never met'}")
    for seen in facts.get("explorations", ()):
        parts.append(
            f"explored {seen['race']}: {seen['points']} points: {seen['survived']} survived,"
            f" {seen['failed']} failed"
        )
    verdict = facts.get("verdict")
    if verdict and verdict.get("checked"):
        held = "held" if verdict["passed"] else "broken"
        parts.append(f"{verdict['case']} expected to {verdict['expected']}: {held}")
    parts += [short(row.caught)] if row.caught else []
    if row.outcome in ("fail", "error") and row.detail:
        parts.append(short(row.detail))
    return "; ".join(parts) or row.outcome


def judged(
    want: str, row: Row, patterns: tuple[str, ...] | str, seen: str | None = None
) -> tuple[bool, str]:
    """Whether a row agrees, and the end of its table line: expected, observed, whether they
    agree, and why, as observed (``seen``: what a table observed itself; by default
    ``observed(row)``). A row agrees when its outcome is the expected one for the expected
    reason: every pattern matches what was observed."""
    seen = observed(row) if seen is None else seen
    wanted = (patterns,) if isinstance(patterns, str) else patterns
    missing = [pattern for pattern in wanted if not re.search(pattern, seen)]
    agree = row.outcome == want and not missing
    status = "as expected" if agree else "DIFFERENT"
    why = seen if agree or row.outcome != want else f"{seen} (expected /{missing[0]}/)"
    return agree, f"{want:<9} {row.outcome:<9} {status:<12} {why[:WIDTH]}"


def run_workers(seed: int, workdir: Path) -> list[Row]:
    """``test_workers.py``'s rows: uvicorn's naive and retrying workers."""
    return run_pytest(seed, workdir, "workers", "test_workers.py", "-p", "xdist", "-n", "2")


def workers_table(rows: list[Row]) -> bool:
    """One row per worker policy: a failure must be the naive workers' death on config.json."""
    print()
    print(
        "A supervisor that hides a dead worker: uvicorn --workers 2 behind a TCP probe, workers=2"
    )
    print(f"{'workers':<8} {'case':<23} {'expected':<9} {'observed':<9} {'':<12} why")
    agree = len(rows) == len(WORKERS_EXPECTED)
    for row in rows:
        match = WORKERS_ID.search(row.name)
        race, policy = match.groups() if match else ("?", "?")
        want = WORKERS_EXPECTED.get(policy, "?")
        ok, status = judged(want, row, WORKERS_REASON.get(policy, ("$^",)))
        agree &= ok
        print(f"{policy:<8} {'transient ' + race:<23} {status}")
    return agree


def run_model_stack(seed: int, workdir: Path) -> list[Row]:
    """``test_model_stack.py``'s rows: the naive and retrying stack racing its weights."""
    return run_pytest(
        seed, workdir, "stack", "test_model_stack.py", "-k", STACK_CASES, "-p", "xdist", "-n", "2"
    )


def stack_observed(row: Row) -> str:
    """What a model-stack row observed: how many processes met the change (the race's hits per
    process) and the first load error a server said it met, then ``observed``."""
    parts = []
    for race in row.facts.get("races", ()):
        met = len(race.get("hits_per_process") or ())
        parts.append(f"met by {met} process{'es' if met != 1 else ''}")
    servers = [server for fleet in row.facts.get("fleets", ()) for server in fleet["servers"]]
    said = [
        match.group(1)
        for server in servers
        for match in map(SAID.match, (server.get("output_tail") or "").splitlines())
        if match
    ]
    parts += [f"said: {said[0]}"] if said else []
    return "; ".join([*parts, observed(row)])


def stack_table(rows: list[Row]) -> bool:
    """One row per policy and topology: a failure must be the processes' death on the weights."""
    print()
    print(
        "A model stack racing its weights (pointer_swap on model.safetensors, default trigger):"
        " AutoConfig, AutoTokenizer, hf_hub_download + safetensors, 2 processes or uvicorn"
        " --workers 2"
    )
    print(f"{'stack':<14} {'case':<23} {'expected':<9} {'observed':<9} {'':<12} why")
    agree = len(rows) == len(STACK_REASON)
    cells = []
    for row in rows:
        match = STACK_ID.search(row.name)
        race, policy, topology = match.groups() if match else ("?", "?", "?")
        cells.append((policy, topology, race, row))
    for policy, topology, race, row in sorted(cells, key=lambda cell: cell[:2]):
        want = STACK_EXPECTED.get(policy, "?")
        reason = STACK_REASON.get((policy, topology), ("$^",))
        ok, status = judged(want, row, reason, stack_observed(row))
        agree &= ok
        print(f"{policy + ' ' + topology:<14} {'transient ' + race:<23} {status}")
    return agree


def cold_start_table(rows: list[Row]) -> bool:
    """One row per cache and download policy: what the 4 members did, and the verdict."""
    print()
    print(
        "Cold start at scale: 4 members download one model at once from a hub on loopback"
        " (snapshot_download, then AutoConfig)"
    )
    print(f"{'cache':<6} {'policy':<7} {'expected':<9} {'observed':<9} {'':<12} why")
    agree = len(rows) == 4
    cells = []
    for row in rows:
        match = COLD_ID.search(row.name)
        cache, policy = match.groups() if match else ("?", "?")
        cells.append((cache, COLD_POLICIES.index(policy), policy, row))
    for cache, _, policy, row in sorted(cells, key=lambda cell: cell[:2]):
        want = COLD_EXPECTED.get((cache, policy), "pass")
        ok, status = judged(want, row, COLD_REASON.get((cache, policy), ("$^",)))
        agree &= ok
        print(f"{cache:<6} {policy:<7} {status}")
    return agree


def zoo_cases(rows: list[Row]) -> Iterator[tuple[re.Match[str], str, str, str, str, str]]:
    """The zoo's rows: (id match, kind, case, policy, outcome, first failure line)."""
    for row in rows:
        match = CASE_ID.search(row.name)
        if match:
            kind, case, policy, _loader = match.groups()
            yield match, kind, case, policy, row.outcome, row.detail


def zoo_table(rows: list[Row]) -> bool:
    print()
    print(
        "The bug zoo: 2 servers per fleet, started at once, loading config.json with transformers.AutoConfig"
    )
    print(f"{'server':<11} {'case':<26} {'expected':<9} {'observed':<9} {'':<12} why")
    agree = len(rows) == 16
    cells = []
    for row in rows:
        match = CASE_ID.search(row.name)
        if match:
            kind, case, policy, _loader = match.groups()
            cells.append((POLICIES.index(policy), kind != "transient", case, policy, kind, row))
    for _, _, case, policy, kind, row in sorted(cells, key=lambda cell: cell[:3]):
        ok, status = judged(expected(policy, kind), row, reason(policy, kind, case))
        agree &= ok
        print(f"{policy:<11} {kind + ' ' + case:<26} {status}")
    return agree


def faults_table(rows: list[Row]) -> bool:
    """One row per fault beyond the hub cache and server policy: expected and observed."""
    print()
    print(
        "Beyond the hub cache and the public incidents: compile caches, locks, ports a server is"
        " told or picks, file-system errors, orders across members, caches that must rebuild,"
        " native accesses"
    )
    print(f"{'fault':<20} {'server':<10} {'expected':<9} {'observed':<9} {'':<12} why")
    agree = True
    order = list(faults.EXPECTED)
    cells = []
    for row in rows:
        match = faults.FAULT_ID.search(row.name)
        if match:
            kind, fault, policy = match.groups()
            fault_row = faults.row_of(kind, fault)
            cells.append((order.index(fault_row), fault_row, policy, row))
    for _, fault, policy, row in sorted(cells, key=lambda cell: cell[:3]):
        ok, status = judged(faults.EXPECTED[fault][policy], row, faults.reason(fault, policy))
        agree &= ok
        print(f"{fault:<20} {policy:<10} {status}")
    expected_cells = sum(len(policies) for policies in faults.EXPECTED.values())
    if len(cells) != expected_cells:
        print(f"  {expected_cells - len(cells)} of {expected_cells} rows are missing")
        agree = False
    return agree


def cache_kinds(rows: list[Row]) -> list[str]:
    return [match.group(1) for row in rows if (match := CACHE_ID.search(row.name))]


def listed(title: str, rows: list[Row], reasons: dict[str, str], want: str = "pass") -> bool:
    """A section of one line per test: every test listed in ``reasons`` ran, each with the
    expected outcome (``want``, or fail where ``want`` is pass and its reason is listed as a
    failure) for the expected reason."""
    print()
    print(title)
    agree = {row.name for row in rows} >= set(reasons)
    for row in rows:
        outcome, pattern = want, reasons.get(row.name, "$^")
        if isinstance(pattern, tuple):
            outcome, pattern = pattern
        ok, status = judged(outcome, row, pattern)
        agree &= ok
        print(f"  {row.name:<62} {status}")
    return agree


def main() -> int:
    seed = int(os.environ.get("STARTUP_GUARD_SEED") or random.SystemRandom().randrange(2**32))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="startup-guard-demo-") as folder:
        workdir = Path(folder)
        zoo = run_pytest(
            seed, workdir, "zoo", "test_zoo.py", "-k", ZOO_CASES, "-p", "xdist", "-n", "2"
        )
        cache = run_pytest(seed, workdir, "cache", "test_fake_cache.py")
        shared = run_pytest(seed, workdir, "faults", *faults.FAULT_FILES, "-p", "xdist", "-n", "2")
        explored = run_pytest(seed, workdir, "explore", "test_explore.py")
        own = run_pytest(seed, workdir, "own", "test_own_race.py")
        imports = run_pytest(
            seed, workdir, "imports", "imports", "--runxfail", "-p", "xdist", "-n", "2"
        )
        workers = run_workers(seed, workdir)
        cold = run_pytest(
            seed, workdir, "cold", "test_cold_start.py", "-k", COLD_CASES, "-p", "xdist", "-n", "2"
        )
        stack = run_model_stack(seed, workdir)
    agree = zoo_table(zoo)
    agree &= listed(
        "The fake cache: what transformers raised on each persistent corruption",
        cache,
        {"test_transformers_reads_the_fake_cache_offline": ""}
        | {
            f"test_corrupt_config_fails_closed[{kind}]": CACHE_REASON.get(kind, r"^\w+Error: ")
            for kind in cache_kinds(cache)
        },
    )
    agree &= faults_table(shared)
    agree &= listed(
        "Every access point of the example server's start-up (server_fleet.explore)",
        explored,
        EXPLORE_REASON,
    )
    agree &= listed(
        "A race of your own (snapshot_resync) and the in-process verdicts", own, OWN_REASON
    )
    agree &= listed(
        "Import races and start methods (the failing examples run with --runxfail: each must fail"
        " for its reason)",
        imports,
        {row.name: "" for row in imports} | {n: ("fail", p) for n, p in IMPORTS_REASON.items()},
    )
    agree &= workers_table(workers)
    agree &= cold_start_table(cold)
    agree &= stack_table(stack)
    print()
    print(
        f"seed {seed}: replay any case with  pytest -p startup_guard --startup-guard-seed={seed} examples/test_zoo.py -k '<case>'"
    )
    print(
        f"{'every verdict as expected' if agree else 'SOME VERDICTS DIFFER FROM THE EXPECTED ONES'} ({time.monotonic() - started:.0f} s)"
    )
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
