"""The startup_races matrix and the verdicts, with small stub servers (no transformers)."""

from __future__ import annotations

from pathlib import Path

import pytest

STUB = (Path(__file__).parent / "stub_server.py").read_text()

CASES = """
import json, sys
import pytest
from pytest_startup_guard import ready

CONFIG = {"config.json": {"model_type": "gpt2"}}

def launch(server_fleet, policy, count=2, timeout=10):
    return server_fleet.launch(
        [sys.executable, "stub.py", policy, "{port}", "acme/tiny"], count=count, timeout=timeout,
        ready=ready.http("/", expect=lambda body: json.loads(body)["model_type"] == "gpt2"),
    )

@pytest.mark.startup_races(transient=["pointer_swap", "ref_rewrite"], corrupt=["empty", "no_model_type", "missing_blob"])
@pytest.mark.parametrize("policy", ["retry", "naive", "swallow", "slow_retry", "quiet_naive", "ignores_cache"])
def test_policy(startup_case, hub_cache, server_fleet, policy):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    startup_case.apply(repo, "config.json")
    startup_case.check(launch(server_fleet, policy, timeout=3 if policy == "slow_retry" else 10))
"""


@pytest.fixture
def verdict_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(stub=STUB)
    return guard_pytester


def test_matrix_ids_all_and_lock_held_only_by_name(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
        import pytest

        @pytest.mark.startup_races(transient="all", corrupt="all")
        def test_everything(startup_case):
            pass

        @pytest.mark.startup_races(transient=["lock_held"])
        def test_lock(startup_case):
            assert (startup_case.kind, startup_case.name) == ("transient", "lock_held")
        """
    )
    result = guard_pytester.runpytest("-p", "startup_guard", "--collect-only", "-q")
    ids = [line.split("::")[1] for line in result.outlines if "::" in line]
    assert ids == [
        "test_everything[transient-pointer_swap]",
        "test_everything[transient-ref_rewrite]",
        "test_everything[transient-blob_rewrite]",
        "test_everything[transient-dangling_pointer]",
        "test_everything[corrupt-empty]",
        "test_everything[corrupt-truncated]",
        "test_everything[corrupt-not_json]",
        "test_everything[corrupt-no_model_type]",
        "test_everything[corrupt-binary]",
        "test_everything[corrupt-dangling_pointer]",
        "test_everything[corrupt-missing_pointer]",
        "test_everything[corrupt-missing_blob]",
        "test_everything[corrupt-empty_ref]",
        "test_everything[corrupt-no_exist]",
        "test_lock[transient-lock_held]",
    ]
    selected = guard_pytester.runpytest(
        "-p", "startup_guard", "-k", "dangling_pointer", "--collect-only", "-q"
    )
    assert [line for line in selected.outlines if "::" in line] == [
        "test_matrix_ids_all_and_lock_held_only_by_name.py::test_everything[transient-dangling_pointer]",
        "test_matrix_ids_all_and_lock_held_only_by_name.py::test_everything[corrupt-dangling_pointer]",
    ]


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (
            'transient=["pointer_swp"]',
            "unknown race 'pointer_swp' in @pytest.mark.startup_races of *::test_x (did you mean 'pointer_swap'?); known races: blob_rewrite, dangling_pointer, file_replace, file_rewrite, folder_move, lock_held, partial_write, pointer_swap, ref_rewrite",
        ),
        (
            'corrupt=["emtpy"]',
            "unknown corruption 'emtpy' in @pytest.mark.startup_races of *::test_x (did you mean 'empty'?); known corruptions: binary, *",
        ),
        ('"pointer_swap"', "@pytest.mark.startup_races of *::test_x takes keyword arguments only*"),
        (
            'transient="pointer_swap"',
            "invalid transient='pointer_swap' in @pytest.mark.startup_races of *::test_x: expected a list of names or 'all'",
        ),
        (
            'races=["pointer_swap"]',
            "unknown keyword 'races' in @pytest.mark.startup_races of *::test_x; expected transient=, corrupt= and/or stale=",
        ),
        ("", "@pytest.mark.startup_races of *::test_x names no case*"),
    ],
)
def test_bad_marker_arguments_fail_at_collection(
    guard_pytester: pytest.Pytester, marker: str, message: str
) -> None:
    guard_pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.startup_races({marker})
        def test_x(startup_case):
            pass
        """
    )
    result = guard_pytester.runpytest("-p", "startup_guard")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*{message}*"])


def test_marker_and_fixture_need_each_other(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
        def test_case_without_marker(startup_case):
            pass
        """
    )
    result = guard_pytester.runpytest("-p", "startup_guard")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*uses startup_case without @pytest.mark.startup_races*"])


def test_every_verdict_with_its_message(verdict_pytester: pytest.Pytester) -> None:
    verdict_pytester.makepyfile(test_cases=CASES)
    result = verdict_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "xdist", "-n", "2", "-rA"
    )
    outcomes = {}
    for line in result.outlines:
        for word in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(word + " ") and "test_policy[" in line:
                outcomes[line.split("[", 1)[1].split("]")[0]] = word
    expected = {}
    for kind, names in (
        ("transient", ["pointer_swap", "ref_rewrite"]),
        ("corrupt", ["empty", "no_model_type", "missing_blob"]),
    ):
        for name in names:
            for policy, verdicts in {
                "retry": ("PASSED", "PASSED"),
                "naive": ("FAILED", "PASSED"),
                "swallow": ("FAILED", "FAILED"),
                "slow_retry": ("PASSED", "FAILED"),
                "quiet_naive": ("FAILED", "FAILED"),  # says nothing about what broke
                "ignores_cache": ("FAILED", "FAILED"),  # never hit; comes up on a corrupt config
            }.items():
                expected[f"{kind}-{name}-{policy}"] = (
                    verdicts[0] if kind == "transient" else verdicts[1]
                )
    assert outcomes == expected
    text = result.stdout.str()
    for fragment in (
        "server 0 did not survive the race: EXITED with code 1 after",
        "server 0 came up on the wrong config (a fallback?): GET / answered 200 but expect() rejected",
        "the race never hit server 0: this case proves nothing for it",
        "server 0 came up on a corrupt config.json (empty): it hid the corruption",
        "server 0 hung: still running on a corrupt config (ready.http(*) not ready after 3 s*); hanging is failing",
        "server 1 failed, but its output names neither 'config.json' nor 'acme/tiny'",
        "startup_case corrupt-empty on config.json of acme/tiny@main: the start-up was expected to have failed closed, but:",
        "startup_case transient-pointer_swap on config.json of acme/tiny@main: the start-up was expected to have survived, but:",
        "test seed *; replay: pytest -p startup_guard --startup-guard-seed=",
    ):
        assert __import__("fnmatch").fnmatch(text, f"*{fragment}*"), fragment


def test_a_case_never_checked_fails(verdict_pytester: pytest.Pytester) -> None:
    verdict_pytester.makepyfile(
        """
        import pytest

        @pytest.mark.startup_races(corrupt=["empty"])
        def test_forgot_to_check(startup_case, hub_cache):
            startup_case.apply(hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}}), "config.json")
        """
    )
    result = verdict_pytester.runpytest("-p", "startup_guard")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*startup_case corrupt-empty was applied but never checked: call startup_case.check(fleet)*"
        ]
    )


def test_in_process_verdicts(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
        import json, time
        import pytest
        from pytest_startup_guard import assert_fails_closed, assert_survives, on_access

        def reader(repo, retries=0):
            def load():
                for attempt in range(retries + 1):
                    try:
                        return json.loads(repo.pointer("config.json").read_text())
                    except Exception:
                        if attempt == retries:
                            raise
                        time.sleep(0.1)
            return load

        @pytest.fixture
        def repo(hub_cache):
            return hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})

        def test_survives(repo, hub_race):
            armed = hub_race.arm("pointer_swap", repo, "config.json", trigger=on_access(hold=0.2))
            assert assert_survives(reader(repo, retries=10), armed, expect=lambda c: c["model_type"] == "gpt2")["model_type"] == "gpt2"

        def test_does_not_survive(repo, hub_race):
            armed = hub_race.arm("pointer_swap", repo, "config.json")
            with pytest.raises(AssertionError, match="the start-up did not survive pointer_swap on config.json of acme/tiny@main .*FileNotFoundError"):
                assert_survives(reader(repo), armed)

        def test_survives_on_a_fallback(repo, hub_race):
            armed = hub_race.arm("pointer_swap", repo, "config.json")
            with pytest.raises(AssertionError, match="returned {'model_type': 'fallback'}, which expect\\\\(\\\\) rejects"):
                assert_survives(lambda: repo.ref().read_text() and {"model_type": "fallback"}, armed, expect=lambda c: c["model_type"] == "gpt2")

        def test_never_hit(repo, hub_race):
            armed = hub_race.arm("pointer_swap", repo, "config.json", allow_miss=True)
            with pytest.raises(AssertionError, match="never hit during the start-up: surviving it proves nothing"):
                assert_survives(lambda: {"model_type": "gpt2"}, armed)

        def test_fails_closed(repo, hub_cache):
            hub_cache.corrupt(repo, "config.json", "truncated")
            error = assert_fails_closed(reader(repo, retries=2), within=5, match="line 2")
            assert isinstance(error, json.JSONDecodeError)

        def test_hides_the_corruption(repo, hub_cache):
            hub_cache.corrupt(repo, "config.json", "empty")
            with pytest.raises(AssertionError, match="returned {'model_type': 'fallback'} on a corrupt config instead of raising: it hid the corruption"):
                assert_fails_closed(lambda: {"model_type": "fallback"}, within=5)

        def test_hangs(repo, hub_cache):
            hub_cache.corrupt(repo, "config.json", "empty")
            with pytest.raises(AssertionError, match="the start-up hangs: it neither returned nor raised within 0.5 s"):
                assert_fails_closed(lambda: time.sleep(3), within=0.5)

        def test_wrong_message(repo, hub_cache):
            hub_cache.corrupt(repo, "config.json", "empty")
            with pytest.raises(AssertionError, match="does not match 'model'"):
                assert_fails_closed(reader(repo), within=5, match="model")
        """
    )
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=8)
