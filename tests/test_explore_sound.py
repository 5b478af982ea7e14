"""Speed never changes a verdict: an exploration's default outcome at every point is the one
running that point gives, and a point that opt-in pruning did not run says so.

Each start-up here is built to break the equivalences pruning once assumed (a window grouped
with an access far past its end; repeats of one code site taken for one point though the
code's state differs; a retry on one call and not on the next). Each is explored three ways
as a user runs it: by default, with ``prune=False`` (every point run: the truth) and with
``prune=True``; and as a ``startup_races(..., explore=True)`` case, whose verdict must be the
exhaustive one's.
"""

from __future__ import annotations

import json
import re

import pytest

# One server, several start-ups (argv[1]), each reading the repo with the real hf_hub_download.
# ``download``/``load``: a retry (20 tries, 50 ms apart) or none.
SERVER = """
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
from huggingface_hub import hf_hub_download

scenario, port = sys.argv[1], int(sys.argv[2])

def download(name, retry):
    for attempt in range(20 if retry else 1):
        try:
            return hf_hub_download("acme/tiny", name)
        except Exception:
            if not retry:
                raise
            time.sleep(0.05)
    sys.exit("gave up downloading " + name)

def load(path, retry):
    for attempt in range(20 if retry else 1):
        try:
            with open(path) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            if not retry:
                raise
            time.sleep(0.05)
    sys.exit("gave up reading " + path)

def read(name, guarded):
    try:
        return load(download(name, False), False)  # every pass from this one line
    except Exception:
        if not guarded:
            raise

if scenario == "retry_download":  # the download retried, the path it returned read once
    for name in ("part-0.json", "config.json"):
        load(download(name, True), False)
elif scenario == "retry_open":  # the download not retried, the read of its path retried
    for name in ("part-0.json", "config.json"):
        load(download(name, False), True)
elif scenario == "optional":  # optional and required files, 0.6 s of work before each
    for name, required in (("part-0.json", False), ("config.json", True), ("part-1.json", False)):
        time.sleep(0.6)
        try:
            load(download(name, False), False)
        except Exception:
            if required:
                raise
elif scenario == "gap":  # no retry, 1 s of work between two files
    load(download("part-0.json", False), False)
    time.sleep(1.0)
    load(download("config.json", False), False)
elif scenario == "three_passes":  # config.json three times from one line, pass 2 unguarded
    for guarded in (True, False, True):
        read("config.json", guarded)
        time.sleep(0.7)

class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""

FILES = """
import json, sys
import pytest
from pytest_startup_guard import ready

FILES = {"config.json": {"model_type": "gpt2"}, "part-0.json": {"i": 0}, "part-1.json": {"i": 1}}

def argv(scenario):
    return [sys.executable, "server.py", scenario, "{port}"]

def ends(exploration):
    return [(p.point.number, p.point.op, p.point.path, p.outcome) for p in exploration.points]
"""

THREE_WAYS = (
    FILES
    + """
@pytest.mark.parametrize("scenario, race, count", CASES)
def test_three_ways(hub_cache, server_fleet, scenario, race, count):
    repo = hub_cache.add_model("acme/tiny", FILES)
    def explore(**kwargs):
        exploration = server_fleet.explore(
            argv(scenario), race, repo, "config.json", count=count, ready=ready.http("/"),
            timeout=30, **kwargs)
        print(exploration)
        return exploration
    default, full, pruned = explore(), explore(prune=False), explore(prune=True)
    # The default runs every point: its outcome at each is the exhaustive one's.
    assert ends(default) == ends(full), (str(default), str(full))
    assert not full.inferred and len(full.explored) == full.found == len(full.points)
    assert not default.inferred and len(default.explored) == default.found
    # Opt-in pruning: every point it did not run is said to be inferred, and (the rule it
    # keeps is sound on these) ends as running it does.
    for point in pruned.points:
        if point.inferred:
            assert "inferred, not run" in point.line(), point.line()
    assert ends(pruned) == ends(full), (str(pruned), str(full))
    print("VERDICTS", scenario, race, count, full.counts())
"""
)


def _three_ways(pytester: pytest.Pytester, cases: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(server=SERVER)
    pytester.makepyfile(test_three_ways=f"CASES = {cases}\n" + THREE_WAYS)
    return pytester.runpytest_subprocess(
        "-p", "startup_guard", "-s", "-p", "no:cacheprovider", *args
    )


def test_retry_on_one_call_but_not_the_next_is_explored_point_by_point(
    guard_pytester: pytest.Pytester,
) -> None:
    """hf_hub_download retried but the path it returns read once, and the reverse: the
    exhaustive run fails at the unguarded reads; the default finds each of them."""
    cases = """[
        ("retry_download", "pointer_swap", 4),
        ("retry_open", "pointer_swap", 4),
        ("retry_download", "pointer_swap", 1),
    ]"""
    result = _three_ways(guard_pytester, cases)
    result.assert_outcomes(passed=3)
    assert len(re.findall(r"VERDICTS .*'failed': [1-9]", result.stdout.str())) == 3


def test_windows_far_from_the_next_read_are_explored_point_by_point(
    guard_pytester: pytest.Pytester,
) -> None:
    """Work between reads longer than the window: a point before it cannot stand for the read
    after it. Optional and required files read by one loop, and a server without retry with
    1 s of work between two files."""
    cases = """[
        ("optional", "ref_rewrite", 4),
        ("gap", "ref_rewrite", 4),
        ("gap", "pointer_swap", 4),
    ]"""
    result = _three_ways(guard_pytester, cases)
    result.assert_outcomes(passed=3)
    text = result.stdout.str()
    assert re.search(r"VERDICTS optional .*'survived': [1-9].*'failed': [1-9]", text), text


def test_repeats_of_one_line_are_explored_point_by_point(guard_pytester: pytest.Pytester) -> None:
    """config.json read three times from one line, the second pass unguarded: the same code,
    path and operation, the cache unchanged in between, yet only the second pass fails."""
    result = _three_ways(guard_pytester, """[("three_passes", "pointer_swap", 4)]""")
    result.assert_outcomes(passed=1)
    assert re.search(r"VERDICTS .*'survived': [1-9].*'failed': [1-9]", result.stdout.str())


CASE = (
    FILES
    + """
@pytest.mark.startup_races(transient=["pointer_swap"], explore=True)
@pytest.mark.parametrize("scenario", ["three_passes", "retry_download"])
def test_case(startup_case, hub_cache, server_fleet, scenario):
    repo = hub_cache.add_model("acme/tiny", FILES)
    startup_case.apply(repo, "config.json")
    fleet = server_fleet.launch(argv(scenario), count=4, ready=ready.http("/"), timeout=30)
    print("EXPLORED", len(startup_case.exploration.explored), "OF", startup_case.exploration.found)
    startup_case.check(fleet)
"""
)


@pytest.mark.parametrize("flag", [None, "--startup-guard-explore-all"])
def test_an_explore_case_fails_by_default_where_every_point_run_fails(
    guard_pytester: pytest.Pytester, flag: str | None
) -> None:
    """The case's verdict is the exhaustive exploration's, with or without the flag: each
    server fails at a point, and the case names it; every point was run."""
    guard_pytester.makepyfile(server=SERVER, test_case=CASE)
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-s", "-p", "no:cacheprovider", *([flag] if flag else [])
    )
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    explored = re.findall(r"EXPLORED (\d+) OF (\d+)", text)
    assert len(explored) == 2 and all(run == found for run, found in explored), explored
    assert "access point #" in text and ": failed" in text


PRUNED_REPORT = (
    FILES
    + """
def test_pruned(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", FILES)
    exploration = server_fleet.explore(
        argv("retry_download"), "pointer_swap", repo, "part-0.json", count=4,
        ready=ready.http("/"), timeout=30, hold=0.05, prune=True)
    print(exploration)
    assert exploration.inferred
"""
)


def test_opt_in_pruning_names_each_inferred_point_in_summary_json_and_html(
    guard_pytester: pytest.Pytester,
) -> None:
    """A race on the first file: the points after its last read are inferred. The table, the
    JSON report and the HTML report say which, and that they were not run."""
    guard_pytester.makepyfile(server=SERVER, test_pruned=PRUNED_REPORT)
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-s", "-p", "no:cacheprovider", "-v",
        "--startup-guard-report=report.json", "--startup-guard-html=report.html",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    inferred_lines = re.findall(r"#(\d+) .*survived  \(inferred, not run: as #(\d+)\)", text)
    assert inferred_lines, text
    report = json.loads((guard_pytester.path / "report.json").read_text())
    (exploration,) = report["tests"][0]["explorations"]
    listed = exploration["inferred_points"]
    assert [str(p["number"]) for p in listed] == [n for n, _ in inferred_lines]
    assert all(p["outcome"] == "survived" and p["run"] is False for p in listed), listed
    assert exploration["explored"] + len(listed) == exploration["points"]
    html = (guard_pytester.path / "report.html").read_text()
    assert "inferred, not run" in html
    assert f"#{listed[0]['number']}" in html
