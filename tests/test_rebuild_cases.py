"""Caches that must rebuild: ``startup_races(rebuild=[...])`` through ``-p startup_guard``.

A corrupt compile-cache entry must be discarded and rebuilt: every server comes up, and the
entry is whole afterwards. The example compile-cache server shows each way to get it wrong
(crash on it, refuse to start, come up around it and leave it) and the right one, under each
corruption of a plain file; a server that rewrites the entry with something not whole is caught
by ``whole=``; a server that never reads the entry proves nothing.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_startup_guard.cache.file_corruptions import FILE_CORRUPTIONS, corrupt_file

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "examples" / "servers"

COMMON = f"""
import sys
import pytest
from pytest_startup_guard import ready

sys.path.insert(0, {str(SERVERS)!r})
from compile_cache_server import artifact_bytes, compile_kernel, is_whole

SERVER = [sys.executable, {str(SERVERS / "compile_cache_server.py")!r}, "--port", "{{port}}"]

def compile_cache(shared_dir, kernel="matmul"):
    '''A compile cache holding one whole entry, as a start-up that filled it left it.'''
    cache = shared_dir / "compile_cache"
    cache.mkdir()
    entry = cache / f"{{kernel}}.artifact"
    entry.write_bytes(artifact_bytes(compile_kernel(kernel)))
    return cache, entry
"""


@pytest.fixture
def rebuild_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


def test_only_a_server_that_rebuilds_the_entry_passes_under_every_corruption(
    rebuild_pytester: pytest.Pytester,
) -> None:
    rebuild_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.startup_races(rebuild="all")
        @pytest.mark.parametrize("policy", ["crash", "refuse", "ignore", "rebuild"])
        def test_cache(startup_case, shared_dir, server_fleet, policy):
            cache, entry = compile_cache(shared_dir)
            startup_case.apply(entry)
            assert startup_case.kind == "rebuild" and not is_whole(entry.read_bytes())
            fleet = server_fleet.launch(
                SERVER + ["--cache", str(cache), "--policy", policy],
                count=2, ready=ready.http("/health"), timeout=20,
            )
            startup_case.check(fleet)
            assert is_whole(entry.read_bytes())  # passed: the entry really was rebuilt
        """
    )
    report = rebuild_pytester.path / "report.json"
    result = rebuild_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-v", f"--startup-guard-report={report}"
    )
    result.assert_outcomes(passed=3, failed=9)
    for corruption in ("empty", "truncated", "garbage"):
        result.stdout.fnmatch_lines(
            [
                f"*test_cache?rebuild-{corruption}-crash? FAILED*",
                f"*test_cache?rebuild-{corruption}-refuse? FAILED*",
                f"*test_cache?rebuild-{corruption}-ignore? FAILED*",
                f"*test_cache?rebuild-{corruption}-rebuild? PASSED*",
            ],
            consecutive=False,
        )
    text = result.stdout.str()
    must = "a cache entry must be discarded and rebuilt, not loaded or refused"
    crashed = "server 1 crashed on the corrupt cache entry compile_cache/matmul.artifact under"
    assert f"{crashed} shared_dir (garbage): EXITED with code 1" in text
    assert text.count(must) >= 6 * 2  # crash and refuse, each corruption, both servers
    refused = "server 0 failed closed on the corrupt cache entry compile_cache/matmul.artifact"
    assert f"{refused} under shared_dir (truncated)" in text
    assert (
        "naming the file is right for a source such as a model's config, wrong for a cache" in text
    )
    result.stdout.fnmatch_lines(
        [
            "*every member became ready, but the corrupt cache entry"
            " */compile_cache/matmul.artifact is still in place (0 bytes, as the empty corruption wrote them): it would be loaded"
            " again on every restart*"
        ]
    )
    tests = {
        test["nodeid"].split("::")[-1]: test for test in json.loads(report.read_text())["tests"]
    }
    for name, passed in (("rebuild-empty-rebuild", True), ("rebuild-garbage-ignore", False)):
        verdict = tests[f"test_cache[{name}]"]["verdict"]
        assert verdict["kind"] == "rebuild" and verdict["expected"] == "rebuild"
        assert verdict["passed"] is passed and verdict["target"].endswith("under shared_dir")


# A server that reads the entry, rewrites it with bytes that are not an artifact, then serves.
REWRITER = """
import os, sys, time
entry = sys.argv[1]
with open(entry, 'rb') as handle:
    handle.read()
with open(entry + '.tmp', 'wb') as handle:
    handle.write(b'not an artifact')
os.replace(entry + '.tmp', entry)
print('up', flush=True)
time.sleep(60)
"""


def test_whole_is_the_users_rule_for_a_rebuilt_entry(rebuild_pytester: pytest.Pytester) -> None:
    rebuild_pytester.makepyfile(
        f"""
        from common import *

        REWRITER = [sys.executable, "-c", {REWRITER!r}]

        @pytest.mark.startup_races(rebuild=["truncated"])
        @pytest.mark.parametrize("rule", ["default", "is_whole"])
        def test_rewritten(startup_case, shared_dir, server_fleet, rule):
            cache, entry = compile_cache(shared_dir)
            startup_case.apply(entry)
            fleet = server_fleet.launch(REWRITER + [str(entry)], ready=ready.log("up"), timeout=20)
            startup_case.check(fleet, whole=is_whole if rule == "is_whole" else None)
        """
    )
    result = rebuild_pytester.runpytest_subprocess("-p", "startup_guard", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_rewritten?rebuild-truncated-default? PASSED*",
            "*test_rewritten?rebuild-truncated-is_whole? FAILED*",
            "*every member became ready, but check(whole=...) rejected the cache entry"
            " */matmul.artifact after the start-up (15 bytes): it was rewritten, but not whole*",
        ]
    )


def test_a_server_that_never_reads_the_entry_proves_nothing(
    rebuild_pytester: pytest.Pytester,
) -> None:
    rebuild_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.startup_races(rebuild=["empty"])
        def test_other_kernel(startup_case, shared_dir, server_fleet):
            cache, entry = compile_cache(shared_dir)
            startup_case.apply(entry)
            fleet = server_fleet.launch(  # loads (and fills) other.artifact beside it
                SERVER + ["--cache", str(cache), "--kernel", "other", "--policy", "rebuild"],
                ready=ready.http("/health"), timeout=20,
            )
            startup_case.check(fleet)

        @pytest.mark.startup_races(rebuild=["empty"])
        def test_never_checked(startup_case, shared_dir):
            startup_case.apply(compile_cache(shared_dir)[1])
        """
    )
    result = rebuild_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1, passed=1, errors=1)  # never_checked: passed, then its teardown
    result.stdout.fnmatch_lines(
        [
            "*server 0 never read the cache entry */compile_cache/matmul.artifact (nor listed its"
            " folder): this case proves nothing for it*",
            "*startup_case rebuild-empty was applied but never checked*",
        ],
        consecutive=False,
    )


def test_the_kinds_mix_in_one_marker(rebuild_pytester: pytest.Pytester) -> None:
    rebuild_pytester.makepyfile(
        """
        import pytest

        @pytest.mark.startup_races(transient=["file_replace"], corrupt=["empty"],
                                   stale=["stale_lock"], rebuild=["empty", "garbage"])
        def test_mixed(startup_case):
            print("CASE", startup_case.kind, startup_case.name)
        """
    )
    result = rebuild_pytester.runpytest_subprocess("-p", "startup_guard", "-v", "-s")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "*test_mixed?transient-file_replace?*",
            "*test_mixed?corrupt-empty?*",
            "*test_mixed?stale-stale_lock?*",
            "*test_mixed?rebuild-empty?*",
            "*test_mixed?rebuild-garbage?*",
        ],
        consecutive=False,
    )
    assert "CASE rebuild garbage" in result.stdout.str()


def test_an_unknown_file_corruption_is_a_clear_error_at_collection(
    rebuild_pytester: pytest.Pytester,
) -> None:
    rebuild_pytester.makepyfile(
        """
        import pytest

        @pytest.mark.startup_races(rebuild=["emty"])
        def test_bad(startup_case):
            pass
        """
    )
    result = rebuild_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*unknown file corruption 'emty'*(did you mean 'empty'?);"
            " known file corruptions: empty, garbage, truncated*"
        ]
    )


@pytest.mark.parametrize("name", sorted(FILE_CORRUPTIONS))
def test_each_file_corruption_leaves_what_it_says_in_place_and_garbage_follows_the_seed(
    tmp_path: Path, name: str
) -> None:
    original = bytes(random.Random(7).randrange(256) for _ in range(301))
    entries = []
    for copy, seed in (("a", 11), ("b", 11), ("c", 12)):
        entry = tmp_path / copy
        entry.write_bytes(original)
        linked = tmp_path / f"{copy}.link"  # a hard link: a source that must stay whole
        linked.hardlink_to(entry)
        corrupted = corrupt_file(entry, name, seed, "the test")
        assert corrupted.original == original and entry.read_bytes() == corrupted.corrupt
        assert linked.read_bytes() == original  # copy on write: the link's inode untouched
        entries.append(corrupted.corrupt)
    corrupt = entries[0]
    if name == "empty":
        assert corrupt == b""
    elif name == "truncated":
        assert corrupt == original[:150]
    else:
        assert len(corrupt) == len(original)
        assert all(
            new != old for new, old in zip(corrupt, original, strict=True)
        )  # every byte changed
        assert entries[1] == corrupt and entries[2] != corrupt  # the seed decides the bytes
