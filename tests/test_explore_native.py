"""Exploring a start-up whose read of the raced file is made in native code
(``native_accesses=True``): ``server_fleet.explore`` and ``startup_races(..., explore=True)``
find the native read as an access point, race it, and judge it as a Python one. The server reads
tokenizer.json with the real ``tokenizers`` library (``Tokenizer.from_file``: Rust's
``File::open``), which no audit hook sees."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CC") or "cc") is None or not sys.platform.startswith("linux"),
    reason="needs a C compiler and Linux's LD_PRELOAD",
)

# tok_server.py POLICY PORT REPO [COMMIT]: reads refs/main (Python's open; with COMMIT given it
# reads no ref), then tokenizer.json in Rust (tokenizers.Tokenizer.from_file; $TOKENIZER_READS
# times, from the same line), then (without COMMIT) config.json (Python's open), and serves the
# ids of "hello world". POLICY: "naive" exits 1 when loading fails; "retry" tries again, 40
# times, 50 ms apart.
SERVER = r"""
import http.server, json, os, sys, time
from tokenizers import Tokenizer

policy, port, repo = sys.argv[1], int(sys.argv[2]), sys.argv[3]
commit = sys.argv[4] if len(sys.argv) > 4 else None
folder = os.path.join(os.environ["HF_HUB_CACHE"], "models--" + repo.replace("/", "--"))


def load():
    revision = commit
    if revision is None:
        with open(os.path.join(folder, "refs", "main")) as ref:
            revision = ref.read()
    snapshot = os.path.join(folder, "snapshots", revision)
    for _ in range(int(os.environ.get("TOKENIZER_READS", "1"))):
        tokenizer = Tokenizer.from_file(os.path.join(snapshot, "tokenizer.json"))  # in Rust
    if commit is None:
        with open(os.path.join(snapshot, "config.json")) as handle:
            json.load(handle)
    return tokenizer


for attempt in range(40 if policy == "retry" else 1):
    try:
        tokenizer = load()
        break
    except Exception as error:
        failure = f"{type(error).__name__}: {error}"
        time.sleep(0.05)
else:
    print(f"cannot load tokenizer.json of {repo}: {failure}", flush=True)
    sys.exit(1)
body = json.dumps({"ids": tokenizer.encode("hello world").ids}).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""

COMMON = """
import json, sys
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from pytest_startup_guard import StartupGuardError, ready

_TOKENIZER = Tokenizer(WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
_TOKENIZER.pre_tokenizer = Whitespace()
FILES = {"config.json": {"model_type": "gpt2"}, "tokenizer.json": json.loads(_TOKENIZER.to_str())}
PROBE = ready.http("/", expect=lambda body: json.loads(body)["ids"] == [1, 2])


def server(policy, *commit):
    return [sys.executable, "tok_server.py", policy, "{port}", "acme/tiny", *commit]


def table(exploration):
    return [(p.point.number, p.point.op, p.point.path.rsplit("/", 1)[-1], p.outcome)
            for p in exploration.points]
"""


@pytest.fixture
def native_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(tok_server=SERVER)
    return guard_pytester


def test_explore_races_the_native_read_at_its_own_access_point(
    native_pytester: pytest.Pytester,
) -> None:
    """Three points: refs/main (Python), tokenizer.json (Rust), config.json (Python). The naive
    server fails where a window meets its native read (#1 and #2) and survives the point after
    it (#3); the hit at #2 is the native open; one that retries survives every point."""
    native_pytester.makepyfile(
        COMMON
        + """
def test_naive(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", FILES)
    exploration = server_fleet.explore(server("naive"), "pointer_swap", repo, "tokenizer.json",
                                       count=4, ready=PROBE, native_accesses=True)
    print(exploration)
    assert table(exploration) == [
        (1, "open", "main", "failed"),
        (2, "open", "tokenizer.json", "failed"),
        (3, "open", "config.json", "survived"),
    ]
    native = exploration.points[1]
    assert native.failure and "cannot load tokenizer.json" in native.failure
    assert {(hit.op, hit.path.rsplit("/", 1)[-1]) for hit in native.hits} == {("open", "tokenizer.json")}
    assert "--startup-guard-explore-point=2" in native.replay


def test_retry(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", FILES)
    exploration = server_fleet.explore(server("retry"), "pointer_swap", repo, "tokenizer.json",
                                       count=4, ready=PROBE, native_accesses=True)
    exploration.assert_all_survived()
    assert [p.outcome for p in exploration.points] == ["survived"] * 3
    assert exploration.points[1].hit


def test_sequential_pruned(hub_cache, server_fleet):
    # One member on the one cache, opt-in pruning: #1 (refs/main) comes before the native read
    # #2, so it is run, not inferred from it; #3, after the last read of tokenizer.json, is
    # the one point with nothing the race changes ahead of it, and is run too.
    repo = hub_cache.add_model("acme/tiny", FILES)
    exploration = server_fleet.explore(server("naive"), "pointer_swap", repo, "tokenizer.json",
                                       count=1, ready=PROBE, native_accesses=True,
                                       mode="sequential", prune=True)
    print(exploration)
    assert table(exploration) == [
        (1, "open", "main", "failed"),
        (2, "open", "tokenizer.json", "failed"),
        (3, "open", "config.json", "survived"),
    ]
    assert not exploration.inferred


def test_native_reads_are_never_repeats(hub_cache, server_fleet):
    # Three native reads from one Python line, opt-in pruning: none is taken for a repeat of
    # another; each is run.
    repo = hub_cache.add_model("acme/tiny", FILES)
    exploration = server_fleet.explore(server("naive"), "pointer_swap", repo, "tokenizer.json",
                                       count=1, ready=PROBE, native_accesses=True,
                                       mode="sequential", env={"TOKENIZER_READS": "3"},
                                       prune=True)
    print(exploration)
    assert table(exploration) == [
        (1, "open", "main", "failed"),
        (2, "open", "tokenizer.json", "failed"),
        (3, "open", "tokenizer.json", "failed"),
        (4, "open", "tokenizer.json", "failed"),
        (5, "open", "config.json", "survived"),
    ]
    assert [p.covered_by for p in exploration.points] == [None] * 5
"""
    )
    result = native_pytester.runpytest("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*3 of 3 access points*"])


def test_without_native_accesses_the_native_read_is_no_access_point(
    native_pytester: pytest.Pytester,
) -> None:
    """Told the commit, the server reads the repo in Rust only: without ``native_accesses`` the
    exploration sees no access at all and says so; with it, the native read is the one point.
    The server that also reads in Python gets no point for tokenizer.json without it."""
    native_pytester.makepyfile(
        COMMON
        + """
def test_blind(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", FILES)
    argv = server("naive", repo.commit)
    with pytest.raises(StartupGuardError, match="the clean start-up never accessed .*models--acme--tiny, so there is no access point to race"):
        server_fleet.explore(argv, "pointer_swap", repo, "tokenizer.json", count=2, ready=PROBE)
    exploration = server_fleet.explore(argv, "pointer_swap", repo, "tokenizer.json", count=2,
                                       ready=PROBE, native_accesses=True)
    assert table(exploration) == [(1, "open", "tokenizer.json", "failed")]
    python_only = server_fleet.explore(server("naive"), "pointer_swap", repo, "tokenizer.json",
                                       count=4, ready=PROBE)
    assert [p.point.path.rsplit("/", 1)[-1] for p in python_only.points] == ["main", "config.json"]
    assert not [hit for p in python_only.points for hit in p.hits if hit.path.endswith("tokenizer.json")]
"""
    )
    native_pytester.runpytest("-p", "startup_guard").assert_outcomes(passed=1)


def test_an_explore_case_races_the_native_read(native_pytester: pytest.Pytester) -> None:
    """``startup_races(transient=["pointer_swap"], explore=True)`` with a launch that takes
    ``native_accesses=True``: the naive server fails naming the native access point, the one
    that retries passes."""
    native_pytester.makepyfile(
        COMMON
        + """
@pytest.mark.startup_races(transient=["pointer_swap"], explore=True)
@pytest.mark.parametrize("policy", ["retry", "naive"])
def test_policy(startup_case, hub_cache, server_fleet, policy):
    repo = hub_cache.add_model("acme/tiny", FILES)
    startup_case.apply(repo, "tokenizer.json")
    fleet = server_fleet.launch(server(policy), count=4, ready=PROBE, native_accesses=True)
    assert [p.point.path.rsplit("/", 1)[-1] for p in startup_case.exploration.points] == [
        "main", "tokenizer.json", "config.json"]
    startup_case.check(fleet)
"""
    )
    result = native_pytester.runpytest("-p", "startup_guard", "-rA")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert (
        "PASSED test_an_explore_case_races_the_native_read.py::test_policy[transient-pointer_swap-retry]"
        in text
    )
    assert "access point #2 (open snapshots/" in text
    assert "/tokenizer.json): failed: server " in text
    assert "--startup-guard-explore-point=2" in text
    assert "explore-point=3" not in text


def test_only_points_after_every_touch_of_the_change_are_inferred() -> None:
    """Opt-in pruning's one rule: a point is inferred only when, from the moment its window
    opens, no process accesses or looks at what the race changes. A look (os.path.exists of
    the pointer) after the last read keeps the points before it run; so does another
    process's read after the point's window opened (a child of the member shares its clone);
    a native read counts as any other; repeats by one code site are never merged."""
    from pytest_startup_guard.races.point_groups import group_points
    from pytest_startup_guard.runtime.events import AccessEvent

    root = "/cache/models--acme--tiny"
    ref, pointer = f"{root}/refs/main", f"{root}/snapshots/c/config.json"
    other = f"{root}/snapshots/c/part-0.json"

    def open_(t: float, path: str, pid: int = 7, **kw: object) -> AccessEvent:
        return AccessEvent(pid, "server:0", "open", path, t, 1, site="loop", **kw)  # type: ignore[arg-type]

    def inert(counted, looks=()):  # type: ignore[no-untyped-def]
        found = len(max(counted.values(), key=len))
        groups = group_points(counted, list(looks), lambda a: a.path == pointer, found)
        return [g.numbers for g in groups if g.inert]

    reads = [open_(1.0, ref), open_(2.0, pointer), open_(3.0, ref), open_(4.0, other)]
    assert inert({7: reads}) == [(3, 4)]
    assert inert({7: [*reads[:2], open_(3.0, pointer, native=True), reads[3]]}) == [(4,)]
    look = AccessEvent(7, "server:0", "os.stat", pointer, 3.5, 1)
    assert inert({7: reads}, [look]) == [(4,)]
    child = [open_(1.5, ref, pid=8), open_(3.7, pointer, pid=8)]
    assert inert({7: reads, 8: child}) == [(4,)]
    repeats = [open_(1.0, pointer), open_(2.0, pointer), open_(3.0, pointer)]
    assert inert({7: repeats}) == []
    groups = group_points({7: repeats}, [], lambda a: a.path == pointer, 3)
    assert [g.numbers for g in groups] == [(1,), (2,), (3,)]


def test_warm_members_stay_refused_with_native_accesses(native_pytester: pytest.Pytester) -> None:
    """The interposer needs LD_PRELOAD when the interpreter starts, which a fork never has: an
    exploration with ``warm=True`` is refused, ``warm='or_cold'`` explores with every member
    started cold (and still sees the native read)."""
    native_pytester.makepyfile(
        COMMON
        + """
def test_warm(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", FILES)
    with pytest.raises(StartupGuardError, match="cannot fork the members of .*native_accesses=True needs LD_PRELOAD.*warm='or_cold'"):
        server_fleet.explore(server("naive"), "pointer_swap", repo, "tokenizer.json", count=4,
                             ready=PROBE, native_accesses=True, warm=True)
    exploration = server_fleet.explore(server("naive"), "pointer_swap", repo, "tokenizer.json",
                                       count=4, ready=PROBE, native_accesses=True, warm="or_cold")
    assert [p.outcome for p in exploration.points] == ["failed", "failed", "survived"]
    (fleet,) = server_fleet.fleets
    assert "started cold (warm='or_cold'): native_accesses=True needs LD_PRELOAD" in fleet.summary()
"""
    )
    native_pytester.runpytest("-p", "startup_guard").assert_outcomes(passed=1)
