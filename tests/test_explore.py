"""``server_fleet.explore`` and ``startup_races(..., explore=True)``: every access point of a
real fleet's start-up raced, one point per run, in parallel (a clone of the cache per member) or
sequentially (the whole fleet on one cache)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from user_env import user_env

STUB = (Path(__file__).parent / "stub_server.py").read_text()
CONFIG_SERVER = Path(__file__).parent.parent / "examples" / "servers" / "config_server.py"

COMMON = """
import json, sys
import pytest
from pytest_startup_guard import ready

CONFIG = {"config.json": {"model_type": "gpt2"}}
PROBE = ready.http("/", expect=lambda body: json.loads(body)["model_type"] == "gpt2")

def stub(policy):
    return [sys.executable, "stub.py", policy, "{port}", "acme/tiny"]
"""


@pytest.fixture
def explore_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(stub=STUB)
    return guard_pytester


def test_parallel_exploration_lists_every_failing_point_with_its_replay(
    explore_pytester: pytest.Pytester,
) -> None:
    """The stub opens refs/main, then its snapshot's config.json: two access points. A naive
    server fails at both; each point names its access, its failure and its own replay."""
    explore_pytester.makepyfile(
        COMMON
        + """
def test_naive(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    exploration = server_fleet.explore(stub("naive"), "pointer_swap", repo, "config.json", count=3, ready=PROBE)
    assert exploration.mode == "parallel" and exploration.launches == 1
    assert [(p.point.number, p.point.op, p.outcome) for p in exploration.points] == [
        (1, "open", "failed"), (2, "open", "failed")]
    assert exploration.points[0].point.path == "refs/main"
    assert exploration.points[1].point.path.endswith("/config.json")
    assert all(p.hit for p in exploration.points)
    exploration.assert_all_survived()
"""
    )
    result = explore_pytester.runpytest("-p", "startup_guard", "--startup-guard-seed=7")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "the start-up did not survive the race at 2 of 2 access points" in text
    assert re.search(r"#1\s+open\s+refs/main\s+failed\s+server \d: EXITED with code 1", text)
    for point in (1, 2):
        assert (
            "replay: pytest -p startup_guard --startup-guard-seed=7"
            f" test_parallel_exploration_lists_every_failing_point_with_its_replay.py::test_naive"
            f" --startup-guard-explore-point={point}"
        ) in text


def test_a_server_that_retries_survives_every_point_in_both_modes(
    explore_pytester: pytest.Pytester,
) -> None:
    explore_pytester.makepyfile(
        COMMON
        + """
@pytest.mark.parametrize("mode", ["parallel", "sequential"])
def test_retry(hub_cache, server_fleet, mode):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    exploration = server_fleet.explore(stub("retry"), "ref_rewrite", repo, "config.json", count=2, ready=PROBE, mode=mode)
    exploration.assert_all_survived()
    assert [p.outcome for p in exploration.points] == ["survived", "survived"]
    assert exploration.mode == mode
    # parallel: member 0 runs clean beside point 1, then a launch for point 2;
    # sequential: one clean launch of the fleet, then one per point
    assert exploration.launches == (2 if mode == "parallel" else 3)
    assert mode in exploration.summary()
    print(exploration)
"""
    )
    result = explore_pytester.runpytest("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*2 of 2 access points (2 survived); sequential*"])


def test_parallel_members_race_private_clones_and_never_each_other(
    explore_pytester: pytest.Pytester,
) -> None:
    """Each member of a parallel launch reads its own clone: the test's cache is never raced,
    and each point's hits are only its own member's."""
    explore_pytester.makepyfile(
        COMMON
        + """
import os

def test_clones(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    before = {p: os.lstat(p).st_ino for p in (repo.pointer("config.json"), repo.ref())}
    exploration = server_fleet.explore(stub("naive"), "pointer_swap", repo, "config.json", count=3, ready=PROBE)
    assert {p: os.lstat(p).st_ino for p in before} == before  # the test's repo untouched
    (fleet,) = server_fleet.fleets  # one launch: 3 members for 2 points
    assert fleet.servers[0].ready  # member 0 ran clean
    assert [outcome.members for outcome in exploration.points] == [(1,), (2,)]
    for outcome in exploration.points:
        (index,) = outcome.members
        server = fleet.servers[index]
        assert server.state == "exited" and outcome.hits
        assert {hit.pid for hit in outcome.hits} == {server.pid}
        assert all(f"/member-{index}/" in hit.path for hit in outcome.hits)
"""
    )
    explore_pytester.runpytest("-p", "startup_guard").assert_outcomes(passed=1)


def test_replay_of_one_point_explores_that_point_alone(explore_pytester: pytest.Pytester) -> None:
    explore_pytester.makepyfile(
        COMMON
        + """
def test_one(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    exploration = server_fleet.explore(stub("naive"), "pointer_swap", repo, "config.json", count=2, ready=PROBE)
    assert [p.point.number for p in exploration.points] == [2]
    assert exploration.found == 2 and exploration.launches == 1
    exploration.assert_all_survived()
"""
    )
    result = explore_pytester.runpytest("-p", "startup_guard", "--startup-guard-explore-point=2")
    result.assert_outcomes(failed=1)
    assert "at 1 of 1 access points" in result.stdout.str()
    assert "--startup-guard-explore-point=2" in result.stdout.str()


def test_a_point_that_no_longer_exists_is_a_clear_error(explore_pytester: pytest.Pytester) -> None:
    explore_pytester.makepyfile(
        COMMON
        + """
@pytest.mark.parametrize("mode", ["parallel", "sequential"])
def test_gone(hub_cache, server_fleet, mode):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    server_fleet.explore(stub("retry"), "pointer_swap", repo, "config.json", count=2, ready=PROBE, mode=mode, points=[5])
"""
    )
    result = explore_pytester.runpytest("-p", "startup_guard")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*StartupGuardError: access point 5 does not exist in this start-up (any more): its"
            " busiest process made 2 access(es) of the repo, points 1 to 2*"
        ]
    )
    result = explore_pytester.runpytest("-p", "startup_guard", "--startup-guard-explore-point=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*invalid --startup-guard-explore-point '0' (command line): expected a whole number"
            " >= 1 (an access point)*"
        ]
    )


def test_bad_input_gets_clear_errors(explore_pytester: pytest.Pytester) -> None:
    explore_pytester.makepyfile(
        COMMON
        + """
from pytest_startup_guard import StartupGuardError

def test_errors(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    def explore(race="pointer_swap", argv=None, **kwargs):
        return server_fleet.explore(argv or stub("retry"), race, repo, "config.json", count=2, ready=PROBE, **kwargs)
    with pytest.raises(StartupGuardError, match="unknown race 'pointer_swop' in server_fleet.explore\\(\\) \\(did you mean 'pointer_swap'\\?\\); known races: "):
        explore("pointer_swop")
    with pytest.raises(StartupGuardError, match="explores transient races; 'stale_lock' is a stale lock"):
        explore("stale_lock")
    with pytest.raises(StartupGuardError, match="invalid mode='fast'.*expected 'parallel'"):
        explore(mode="fast")
    with pytest.raises(StartupGuardError, match=r"invalid points\\[0\\]=0 for server_fleet.explore\\(\\): expected a whole number >= 1 \\(an access point\\)"):
        explore(points=[0])
    with pytest.raises(StartupGuardError, match=r"invalid count=0 for server_fleet.explore\\(\\)"):
        server_fleet.explore(stub("retry"), "pointer_swap", repo, "config.json", count=0, ready=PROBE)
    with pytest.raises(ValueError, match=r"invalid hold=-1"):
        explore(hold=-1)
    with pytest.raises(StartupGuardError, match="the start-up fails without any race, so there is nothing to explore"):
        explore(argv=[sys.executable, "-c", "import sys; print('broken start-up'); sys.exit(3)", "{port}"])
    with pytest.raises(StartupGuardError, match="never accessed .*models--acme--tiny"):
        explore(argv=stub("ignores_cache"))
"""
    )
    explore_pytester.runpytest("-p", "startup_guard").assert_outcomes(passed=1)


def test_clean_failure_names_the_members_output(explore_pytester: pytest.Pytester) -> None:
    explore_pytester.makepyfile(
        COMMON
        + """
def test_broken(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    server_fleet.explore([sys.executable, "-c", "print('no model here'); raise SystemExit(3)", "{port}"], "pointer_swap", repo, "config.json", count=2, ready=PROBE)
"""
    )
    result = explore_pytester.runpytest("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the start-up fails without any race, so there is nothing to explore:*",
            "*server 0*EXITED with code 3*",
            "*| no model here*",
        ]
    )


def test_explore_marker_turns_a_transient_case_into_every_access_point(
    explore_pytester: pytest.Pytester,
) -> None:
    """The test body is the usual one; ``explore=True`` makes its launch explore."""
    explore_pytester.makepyfile(
        COMMON
        + """
@pytest.mark.startup_races(transient=["pointer_swap", "dangling_pointer"], corrupt=["empty"], explore=True)
@pytest.mark.parametrize("policy", ["retry", "naive"])
def test_policy(startup_case, hub_cache, server_fleet, policy):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    startup_case.apply(repo, "config.json")
    fleet = server_fleet.launch(stub(policy), count=2, ready=PROBE, timeout=10)
    if startup_case.kind == "transient":
        assert fleet is server_fleet.fleets[0] and len(startup_case.exploration.points) == 2
    else:
        assert startup_case.exploration is None  # a corruption is judged as always
    startup_case.check(fleet)
"""
    )
    result = explore_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "xdist", "-n", "2", "-rA"
    )
    result.assert_outcomes(passed=4, failed=2)
    text = result.stdout.str()
    assert "test_policy[transient-pointer_swap-naive]" in text
    assert "test_policy[transient-dangling_pointer-naive]" in text
    assert "access point #1 (open refs/main): failed: server 1: EXITED with code 1" in text
    assert "--startup-guard-explore-point=2" in text
    for passed in (
        "transient-pointer_swap-retry",
        "transient-dangling_pointer-retry",
        "corrupt-empty-retry",
        "corrupt-empty-naive",
    ):
        assert (
            f"PASSED test_explore_marker_turns_a_transient_case_into_every_access_point.py::test_policy[{passed}]"
            in text
        )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            'transient=["pointer_swap"], explore="everywhere"',
            "invalid explore='everywhere' in @pytest.mark.startup_races of test_explore_marker_arguments_are_checked.py::test_bad:"
            " expected True (parallel), 'parallel', 'sequential' or False",
        ),
        (
            'corrupt=["empty"], explore=True',
            "explore=True in @pytest.mark.startup_races of test_explore_marker_arguments_are_checked.py::test_bad races"
            " transient cases at every access point, and this marker names none: add transient=[...]",
        ),
    ],
)
def test_explore_marker_arguments_are_checked(
    guard_pytester: pytest.Pytester, arguments: str, message: str
) -> None:
    guard_pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.startup_races({arguments})
        def test_bad(startup_case):
            pass
        """
    )
    result = guard_pytester.runpytest("-p", "startup_guard")
    assert result.ret != pytest.ExitCode.OK
    assert message in result.stdout.str()


def test_against_real_huggingface_hub(guard_pytester: pytest.Pytester) -> None:
    """The examples' config server with ``hf_hub_download``: its points, in the real library's
    order, and its bounded retry surviving each of them."""
    guard_pytester.makepyfile(
        f"""
        import sys
        from pytest_startup_guard import ready

        SERVER = {str(CONFIG_SERVER)!r}

        def test_real(hub_cache, server_fleet):
            repo = hub_cache.add_model("acme/tiny", {{"config.json": {{"model_type": "gpt2"}}}})
            argv = [sys.executable, SERVER, "--model", "acme/tiny", "--port", "{{port}}", "--loader", "hub_json"]
            naive = server_fleet.explore(argv + ["--policy", "naive"], "pointer_swap", repo, "config.json", count=4, ready=ready.http("/health"))
            print(naive)
            assert naive.failed and "refs/main" in [p.point.path for p in naive.points]
            retry = server_fleet.explore(argv + ["--policy", "retry"], "pointer_swap", repo, "config.json", count=4, ready=ready.http("/health"))
            print(retry)
            retry.assert_all_survived()
            assert [p.point for p in retry.points] == [p.point for p in naive.points]
        """
    )
    result = guard_pytester.runpytest("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=1)


def test_the_examples_exploration_catches_the_naive_server_at_every_point(
    tmp_path: Path,
) -> None:
    """``examples/test_explore.py`` (the demo's rows) as a user runs it: the transformers
    server without retry dies at every access point, the one with retry survives them all."""
    import subprocess
    import sys

    env = user_env()
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "no:cacheprovider", "-rA",
         f"--basetemp={tmp_path / 'tmp'}", "test_explore.py"],
        cwd=CONFIG_SERVER.parent.parent, env=env, capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-4000:]
    for name in (
        "test_every_access_point[naive]",
        "test_every_access_point[retry]",
        "test_retry_survives_every_access_point[transient-pointer_swap]",
        "test_retry_survives_every_access_point[transient-ref_rewrite]",
    ):
        assert f"PASSED test_explore.py::{name}" in completed.stdout
