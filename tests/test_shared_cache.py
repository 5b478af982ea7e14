"""shared_hub_cache: one build per run, also under pytest-xdist."""

from __future__ import annotations

import pytest

SUITE = """
import os, pytest

CONFIG = {"config.json": {"model_type": "gpt2"}, "weights.safetensors": b"0" * 4096}

@pytest.mark.parametrize("n", range(12))
def test_worker_reads_the_shared_model(shared_hub_cache, n):
    repo = shared_hub_cache.add_model("acme/shared", CONFIG)
    assert repo.pointer("config.json").read_text().startswith("{")
    with open(os.environ["COMMITS_FILE"], "a") as out:
        out.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {repo.commit} {shared_hub_cache.root}\\n")
"""


def test_shared_cache_is_built_once_under_three_workers(
    guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits_file = guard_pytester.path / "commits.txt"
    monkeypatch.setenv("COMMITS_FILE", str(commits_file))
    guard_pytester.makepyfile(SUITE)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-p", "xdist", "-n", "3")
    result.assert_outcomes(passed=12)
    lines = [line.split() for line in commits_file.read_text().splitlines()]
    workers = {line[0] for line in lines}
    assert len(workers) == 3, workers
    assert len({line[1] for line in lines}) == 1  # one commit everywhere
    roots = {line[2] for line in lines}
    assert len(roots) == 1  # one cache for every worker
    from pytest_startup_guard import FakeHubCache

    builds = FakeHubCache(roots.pop(), shared=True).builds()
    assert len(builds) == 1, builds


def test_shared_cache_without_xdist_is_fresh_per_run(
    guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits_file = guard_pytester.path / "commits.txt"
    monkeypatch.setenv("COMMITS_FILE", str(commits_file))
    guard_pytester.makepyfile(SUITE)
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=12)
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=12)
    roots = {line.split()[2] for line in commits_file.read_text().splitlines()}
    assert len(roots) == 2
