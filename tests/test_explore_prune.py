"""Opt-in pruning (``prune=True``) ends as running every point, and says what it inferred.

Each test explores the same start-up both ways, ``prune=True`` and ``prune=False`` (the
default; or ``--startup-guard-explore-all``), and requires the same outcome at every point: the
truth is each point's own run in the full exploration. ``test_explore_sound.py`` holds the
start-ups built to break the rules pruning once had.
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from user_env import user_env

EXAMPLES = Path(__file__).parent.parent / "examples"

# A start-up of many hf_hub_download calls: FILES files read in a loop, two accesses each (the
# ref, then the file). ``retry_from``: the iterations from which a failed read is retried
# (0: every one; FILES: none; 1: every one but the first: the same code treating its first
# call differently).
MANY_CALLS = """
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
from huggingface_hub import hf_hub_download
FILES, retry_from = 6, int(sys.argv[2])
for index in range(FILES):
    for attempt in range(20):
        try:
            with open(hf_hub_download("acme/tiny", "part-%d.json" % index)) as handle:
                json.load(handle)
            break
        except (OSError, ValueError):
            if index < retry_from:
                raise
            time.sleep(0.02)
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""

BOTH_WAYS = """
import sys
import pytest
from pytest_startup_guard import ready

PARTS = {f"part-{i}.json": {"index": i} for i in range(6)}

@pytest.mark.parametrize("race, filename, retry_from, mode, count", CASES)
def test_both_ways(hub_cache, server_fleet, race, filename, retry_from, mode, count):
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}, **PARTS})
    argv = [sys.executable, "many_calls.py", "{port}", str(retry_from)]
    # A retrying server: a window far shorter than its retries (20 x 20 ms). One without retry:
    # a window that outlasts the rest of its start-up, so a point fails exactly when a read of
    # what the race changes comes after it. With 50 ms and no retry, whether the first call's
    # reads (its lazy imports between them) fit in the window turned on the load (seen at a
    # load average of 27 on 2 cores): a point whose outcome is timing, run or inferred alike.
    hold = 0.05 if retry_from < 6 else 0.5
    runs = {}
    for prune in (True, False):
        runs[prune] = server_fleet.explore(
            argv, race, repo, filename, count=count, ready=ready.http("/"), mode=mode,
            hold=hold, prune=prune,
        )
        print(runs[prune])
    pruned, full = runs[True], runs[False]
    assert full.found == pruned.found == 12 and not full.inferred
    assert [(p.point, p.outcome) for p in pruned.points] == [
        (p.point, p.outcome) for p in full.points
    ]
    assert pruned.startups <= full.startups, (pruned.startups, full.startups)
    for point in pruned.inferred:
        print(f"INFERRED #{point.point.number} from #{point.covered_by}: {point.covered}")
        assert pruned.points[point.covered_by - 1].covered_by is None
        assert "inferred, not run" in point.line()
"""


def _run_both_ways(pytester: pytest.Pytester, cases: str) -> pytest.RunResult:
    pytester.makepyfile(many_calls=MANY_CALLS)
    pytester.makepyfile(test_both_ways=f"CASES = {cases}\n" + BOTH_WAYS)
    return pytester.runpytest_subprocess("-p", "startup_guard", "-s", "-p", "no:cacheprovider")


def test_many_hf_hub_download_calls_explored_both_ways_end_alike(
    guard_pytester: pytest.Pytester,
) -> None:
    """A race on the first file, on the last, and on the ref every call reads; a server that
    dies of it and one that retries: every point's outcome is the same pruned and full, in no
    more start-ups, and each inferred point names a point that was run, with the reason. Only
    the race on the first file has points after which nothing reads or looks at what it
    changes (3 to 12); the others infer nothing."""
    cases = """[
        ("pointer_swap", "part-0.json", 6, "parallel", 4),
        ("pointer_swap", "part-5.json", 0, "parallel", 4),
        ("ref_rewrite", "part-0.json", 6, "parallel", 4),
        ("ref_rewrite", "part-0.json", 0, "sequential", 1),
    ]"""
    result = _run_both_ways(guard_pytester, cases)
    result.assert_outcomes(passed=4)
    output = result.stdout.str()
    # Points after the last read of part-0.json change nothing any process reads.
    assert "no process accesses or looks at anything the race changes" in output
    inferred = re.findall(r"12 of 12 access points, (\d+) run and (\d+) inferred, not run", output)
    assert inferred == [("3", "9")], output  # #3 run for #3-#12, #1 and #2 run; none elsewhere


def test_a_loop_that_treats_its_first_call_differently_is_explored_point_by_point(
    guard_pytester: pytest.Pytester,
) -> None:
    """Only the loop's first call gives up on a failed read: the same code, the same ref, the
    cache unchanged, yet the first repeat fails and the later ones survive: repeats are never
    merged, so every point is run, and the outcomes match the full exploration's."""
    cases = """[("ref_rewrite", "part-0.json", 1, "parallel", 2)]"""
    result = _run_both_ways(guard_pytester, cases)
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "12 of 12 access points (11 survived, 1 failed)" in output
    assert "inferred, not run" not in output


def _caught(junit: Path) -> dict[str, str]:
    """Each example test's outcome and the points its exploration recorded (launches left out:
    they are what pruning changes)."""
    caught = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        failed = case.find("failure") is not None or case.find("error") is not None
        words = "failed" if failed else "passed"
        for prop in case.iter("property"):
            if prop.get("name") == "caught":
                words += ": " + re.sub(r" in \d+ launch\(es\)", "", prop.get("value", ""))
        caught[name] = words
    return caught


def test_the_examples_explorations_end_alike_pruned_and_full(tmp_path: Path) -> None:
    """``examples/test_explore.py`` (the demo's explorations: the transformers server without
    retry and with it, and ``explore=True`` cases of two races) run as a user runs it, once as
    it is (every point run: the default) and once with ``--startup-guard-explore-all``: the
    same tests pass and fail, and every point ends the same way."""
    results = {}
    for name, extra in (("pruned", []), ("full", ["--startup-guard-explore-all"])):
        junit = tmp_path / f"{name}.xml"
        completed = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "no:cacheprovider",
             f"--basetemp={tmp_path / name}", f"--junitxml={junit}", *extra, "test_explore.py"],
            cwd=EXAMPLES, env=user_env(), capture_output=True, text=True, timeout=600,
            check=False,
        )  # fmt: skip
        assert completed.returncode == 0, completed.stdout[-4000:]
        results[name] = _caught(junit)
    assert len(results["full"]) == 4
    assert results["pruned"] == results["full"]


WARM_EXPLORE = """
import sys
from pytest_startup_guard import ready

PARTS = {f"part-{i}.json": {"index": i} for i in range(6)}

def test_warm(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}, **PARTS})
    argv = [sys.executable, "many_calls.py", "{port}", "6"]
    runs = {}
    for warm in (False, True):
        runs[warm] = server_fleet.explore(
            argv, "pointer_swap", repo, "part-5.json", count=4, ready=ready.http("/"),
            hold=0.5, warm=warm, preload=["huggingface_hub"] if warm else None, prune=True,
        )
        print(runs[warm])
    assert [(p.point, p.outcome, p.covered_by) for p in runs[True].points] == [
        (p.point, p.outcome, p.covered_by) for p in runs[False].points
    ]
    assert runs[True].failed
    forked = [fleet for fleet in server_fleet.fleets if "forked from warm" in fleet.summary()]
    assert len(forked) == runs[True].launches
"""


def test_an_exploration_of_warm_members_ends_as_a_cold_one(guard_pytester: pytest.Pytester) -> None:
    """``explore(..., warm=True, preload=[...], prune=True)`` forks every launch's members from
    a template; the clean member's accesses and looks infer the same points, and every point
    ends as in the cold exploration. The hold outlasts the rest of the start-up from any point:
    with a window that closes within milliseconds of a decisive read (hold=0.05), a point's
    outcome turns on timing, which a fork (its imports done) changes, run or inferred alike."""
    guard_pytester.makepyfile(many_calls=MANY_CALLS, test_warm=WARM_EXPLORE)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=1)
