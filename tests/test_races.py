"""Races against the real transformers and huggingface_hub: deterministic, seeded, never vacuous."""

from __future__ import annotations

import pytest

# Loaders a serving stack might have, written into every inner test session as loaders.py.
LOADERS = '''
import json, os, random, sys, time

from pytest_startup_guard import FakeHubCache


def load_config(repo_id="acme/tiny"):
    from transformers import AutoConfig
    return AutoConfig.from_pretrained(repo_id)


def load_config_locked(lock, timeout=0.05):
    """Checks no download of the blob is under way (takes and drops its huggingface_hub
    lock, as a downloader would), then loads."""
    from huggingface_hub.utils import WeakFileLock
    with WeakFileLock(lock, timeout=timeout):
        pass
    return load_config()


def with_retry(func, max_retries=6, delay=0.02, seed=0):
    """Bounded, jittered retry that re-raises at the end (budget ~0.6-1.9 s)."""
    rng = random.Random(seed)
    for attempt in range(max_retries + 1):
        try:
            return func()
        except Exception:
            if attempt == max_retries:
                raise
            time.sleep(delay * (2 ** attempt) * rng.uniform(0.5, 1.5))


def child_main():
    """A reader process: one load per line on stdin, one JSON result per line on stdout."""
    loader = sys.argv[1]
    lock = sys.argv[2]
    load = load_config
    if loader.endswith("locked"):
        load = lambda: load_config_locked(lock)
    if loader.startswith("retry"):
        inner = load
        load = lambda: with_retry(inner)
    import transformers  # imported before the first round: rounds time the load only
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        try:
            config = load()
            print(json.dumps({"ok": config.model_type}), flush=True)
        except Exception as error:
            print(json.dumps({"error": f"{type(error).__name__}: {error}"[:300]}), flush=True)


if __name__ == "__main__":
    child_main()
'''

SIGNATURES = r"""
import json, os, subprocess, sys
import pytest
from pytest_startup_guard import on_access
from loaders import load_config

CONFIG = {"config.json": {"model_type": "gpt2", "n_layer": 2}}

CASES = {
    "local_entry_not_found": ([dict(nth=1)], "OSError", "We couldn't connect"),
    "file_not_found": ([dict(nth=3)], "FileNotFoundError", "No such file or directory"),
    # absent at the first lookup, back for hf_hub_download (closed at its $HF_HOME/token read),
    # absent again at the final lookup: transformers ends up with an empty config dict.
    "unrecognized_model": ([dict(nth=2, accesses=1), dict(nth=3, accesses=1)], "ValueError", "Unrecognized model in acme/tiny"),
}

def arm(hub_race, repo, triggers):
    return [hub_race.arm("pointer_swap", repo, "config.json", trigger=on_access(**t)) for t in triggers]

@pytest.mark.parametrize("case", CASES)
def test_in_process(hub_cache, hub_race, case):
    triggers, exception, message = CASES[case]
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    load_config()
    for attempt in range(3):  # every time
        armed = arm(hub_race, repo, triggers)
        with pytest.raises(Exception) as raised:
            load_config()
        assert type(raised.value).__name__ == exception and message in str(raised.value)
        if case == "local_entry_not_found":
            assert type(raised.value.__cause__).__name__ == "LocalEntryNotFoundError"
        for race in armed:
            race.disarm()
            assert race.hits and all(hit.member == "test" for hit in race.hits)
        assert load_config().n_layer == 2  # whole again

CHILD = "import sys; from loaders import load_config; print(load_config().model_type)"

@pytest.mark.parametrize("case", CASES)
def test_in_a_child_process(hub_cache, hub_race, child_runtime, case):
    triggers, exception, message = CASES[case]
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    armed = arm(hub_race, repo, triggers)
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    raised = [line for line in result.stderr.splitlines() if line.startswith(exception + ":")]
    assert raised and message in raised[-1], result.stderr[-2000:]
    for race in armed:
        assert race.hits and {hit.pid for hit in race.hits} != {os.getpid()}

def test_ref_rewrite_makes_try_to_load_from_cache_return_none(hub_cache, hub_race):
    from huggingface_hub import try_to_load_from_cache
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    assert try_to_load_from_cache("acme/tiny", "config.json") == str(repo.pointer("config.json"))
    armed = hub_race.arm("ref_rewrite", repo, "config.json")
    assert try_to_load_from_cache("acme/tiny", "config.json") is None
    assert repo.ref().read_text() == ""  # inside the window: the truncated ref
    armed.disarm()
    assert repo.ref().read_text() == repo.commit
    assert try_to_load_from_cache("acme/tiny", "config.json") == str(repo.pointer("config.json"))

def test_explore_lists_every_access_point_of_autoconfig(hub_cache, hub_race):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    exploration = hub_race.explore("pointer_swap", repo, "config.json", load_config, hold=0.2)
    print(exploration)
    ops = [(p.point.op, p.point.path) for p in exploration.points]
    assert ops == [
        ("open", "refs/main"),
        ("os.listdir", "snapshots"),
        ("open", f"snapshots/{repo.commit}/config.json"),
    ]
    assert [p.outcome for p in exploration.points] == ["failed"] * 3
    assert exploration.points[2].failure.startswith("FileNotFoundError")
    assert all(p.hit for p in exploration.points)

def test_explore_a_point_never_reached_proves_nothing(hub_cache, hub_race):
    # In the test process as in a fleet: a run that never made the access is not survived.
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    runs = []
    def startup():
        runs.append(1)
        if len(runs) == 1:  # only the clean run reads the config
            load_config()
    exploration = hub_race.explore("pointer_swap", repo, "config.json", startup, hold=0.2)
    assert len(runs) == 4  # the clean run, then one per point: none of them read the repo
    assert [p.outcome for p in exploration.points] == ["not reached"] * 3
    assert not any(p.hit for p in exploration.points)
    with pytest.raises(AssertionError, match="did not survive the race at 3 of 3 access points"):
        exploration.assert_all_survived()

def test_explore_refuses_bad_points_before_the_start_up_runs(hub_cache, hub_race):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    runs = []
    for points, message in [
        ([0], r"invalid points\[0\]=0 for hub_race.explore\(\): expected a whole number >= 1"),
        ("1", r"invalid points='1' for hub_race.explore\(\): expected a list of access point"),
    ]:
        with pytest.raises(ValueError, match=message):
            hub_race.explore("pointer_swap", repo, "config.json", lambda: runs.append(1), points=points)
    assert runs == []
"""


@pytest.fixture
def race_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(loaders=LOADERS)
    guard_pytester.syspathinsert()
    return guard_pytester


def test_deterministic_triggers_give_each_real_signature(race_pytester: pytest.Pytester) -> None:
    race_pytester.makepyfile(test_signatures=SIGNATURES)
    result = race_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-s", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(
        [
            "*explore pointer_swap on config.json of acme/tiny@main: 3 of 3 access points"
            " (3 failed); in-process: the start-up in the test process; 4 run(s)*"
        ]
    )


VERDICTS = """
import json, os, subprocess, sys, time
import pytest
from pytest_startup_guard import on_access
from loaders import load_config, load_config_locked, with_retry

CONFIG = {"config.json": {"model_type": "gpt2", "n_layer": 2}}
RUNS = 20
HOLD = 0.1  # shorter than the retry budget

def loader_for(name, repo, kind):
    lock = str(repo.lock("config.json"))
    load = (lambda: load_config_locked(lock)) if name == "lock_held" else load_config
    return load if kind == "naive" else (lambda: with_retry(load))

@pytest.mark.parametrize("kind", ["naive", "retry"])
def test_in_process(hub_cache, hub_race, race_name, kind):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    load = loader_for(race_name, repo, kind)
    load()
    outcomes = []
    for run in range(RUNS):
        armed = hub_race.arm(race_name, repo, "config.json", trigger=on_access(hold=HOLD))
        try:
            outcomes.append(load().model_type)
        except Exception as error:
            outcomes.append(type(error).__name__)
        armed.disarm()
        assert armed.hits, f"run {run}: the race never hit"
    if kind == "naive":
        assert "gpt2" not in outcomes, outcomes  # fails every time
    else:
        assert outcomes == ["gpt2"] * RUNS  # survives every time

@pytest.mark.parametrize("kind", ["naive", "retry"])
def test_in_four_child_processes(hub_cache, hub_race, child_runtime, race_name, kind):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    loader = ("retry" if kind == "retry" else "naive") + ("-locked" if race_name == "lock_held" else "")
    children = [
        subprocess.Popen([sys.executable, "loaders.py", loader, str(repo.lock("config.json"))],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    try:
        for child in children:
            assert "ready" in child.stdout.readline()
        outcomes = []
        for run in range(RUNS):
            armed = hub_race.arm(race_name, repo, "config.json", trigger=on_access(hold=HOLD))
            for child in children:
                child.stdin.write("go\\n")
                child.stdin.flush()
            results = [json.loads(child.stdout.readline()) for child in children]
            armed.disarm()
            assert {hit.pid for hit in armed.hits} == {c.pid for c in children}, f"run {run}"
            outcomes.extend(results)
        if kind == "naive":
            assert all("error" in r for r in outcomes), outcomes
        else:
            assert all(r.get("ok") == "gpt2" for r in outcomes), outcomes
    finally:
        for child in children:
            child.stdin.close()
            child.wait(timeout=30)
"""


@pytest.mark.parametrize(
    "race", ["pointer_swap", "ref_rewrite", "blob_rewrite", "dangling_pointer", "lock_held"]
)
def test_no_retry_fails_and_jittered_retry_survives_twenty_times(
    race_pytester: pytest.Pytester, race: str
) -> None:
    race_pytester.makeconftest(
        f"""
        import pytest

        @pytest.fixture
        def race_name():
            return "{race}"
        """
    )
    race_pytester.makepyfile(test_verdicts=VERDICTS)
    result = race_pytester.runpytest_subprocess("-p", "startup_guard", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_a_race_that_never_hit_fails_the_test_and_names_the_opt_out(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        """
        def test_never_read(hub_cache, hub_race):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            hub_race.arm("pointer_swap", repo, "config.json")

        def test_allowed_miss(hub_cache, hub_race):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            hub_race.arm("pointer_swap", repo, "config.json", allow_miss=True)
        """
    )
    result = guard_pytester.runpytest("-p", "startup_guard")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*race pointer_swap on config.json of acme/tiny@main with on_access(hold=0.0201) never hit:"
            " its window never opened: no process accessed config.json.*allow_miss=True*",
            "replay: pytest -p startup_guard --startup-guard-seed=* test_a_race_that_never_hit_fails_the_test_and_names_the_opt_out.py::test_never_read",
        ]
    )


def test_bad_input_is_named(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
        import pytest
        from pytest_startup_guard import UnknownNameError, UnsafeCacheError, on_access

        def test_unknown_race(hub_cache, hub_race):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            with pytest.raises(UnknownNameError) as raised:
                hub_race.arm("pointer_swp", repo, "config.json")
            message = str(raised.value)
            assert "unknown race 'pointer_swp' in hub_race.arm() (did you mean 'pointer_swap'?)" in message
            for name in ("blob_rewrite", "dangling_pointer", "lock_held", "pointer_swap", "ref_rewrite"):
                assert name in message

        def test_shared_repo_is_refused(shared_hub_cache, hub_race):
            repo = shared_hub_cache.add_model("acme/shared", {"config.json": {"model_type": "gpt2"}})
            with pytest.raises(UnsafeCacheError, match=r"hub_cache.copy_of\\(repo\\)"):
                hub_race.arm("pointer_swap", repo, "config.json")

        def test_copy_of_a_shared_repo_can_race(shared_hub_cache, hub_cache, hub_race):
            shared = shared_hub_cache.add_model("acme/shared", {"config.json": {"model_type": "gpt2"}})
            copy = hub_cache.copy_of(shared)
            armed = hub_race.arm("blob_rewrite", copy, "config.json")
            assert copy.pointer("config.json").read_bytes() == b""
            assert shared.pointer("config.json").read_bytes().startswith(b"{")
            assert armed.hits

        def test_unknown_file(hub_cache, hub_race):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            with pytest.raises(KeyError, match="has no file 'tokenizer.json'"):
                hub_race.arm("pointer_swap", repo, "tokenizer.json")

        @pytest.mark.parametrize("call, message", [
            (lambda: on_access(nth=0), "invalid nth=0 for on_access(): expected a whole number >= 1"),
            (lambda: on_access(hold=-1), "invalid hold=-1 for on_access(): expected a non-negative number of seconds (at most 86400: a day)"),
        ])
        def test_bad_trigger(call, message):
            with pytest.raises(ValueError) as raised:
                call()
            assert str(raised.value) == message
        """
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=6)


def test_users_own_race_from_a_conftest_hook_and_register_race(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makeconftest(
        """
        import os
        from pytest_startup_guard import Race

        class ConfigSwappedForDirectory(Race):
            '''A broken sync tool that briefly leaves a directory where the file was.'''
            name = "dir_swap"
            models = "a sync tool creating a directory in place of a file"

            def open(self, target):
                os.remove(target.pointer)
                os.mkdir(target.pointer)

            def close(self, target):
                if os.path.isdir(target.pointer) and not os.path.islink(target.pointer):
                    os.rmdir(target.pointer)
                if not os.path.lexists(target.pointer):
                    os.symlink(os.path.relpath(target.blob, target.pointer.parent), target.pointer)

        def pytest_startup_guard_races():
            return {"dir_swap": ConfigSwappedForDirectory}
        """
    )
    guard_pytester.makepyfile(
        """
        import json, os
        import pytest
        from pytest_startup_guard import RACES, Race, register_race

        class Truncator(Race):
            name = "truncate_ref"
            def open(self, target):
                target.ref.write_text("")
            def close(self, target):
                target.ref.write_text(target.commit)

        def test_hooked_race(hub_cache, hub_race):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            armed = hub_race.arm("dir_swap", repo, "config.json")
            # The first look at what the race changes opens the window (before it proceeds).
            assert os.path.isdir(repo.pointer("config.json"))
            armed.disarm()
            assert json.loads(repo.pointer("config.json").read_text())["model_type"] == "gpt2"

        def test_registered_race(hub_cache, hub_race):
            register_race("truncate_ref", Truncator)
            assert RACES["truncate_ref"] is Truncator
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            armed = hub_race.arm("truncate_ref", repo, "config.json")
            assert repo.ref().read_text() == ""  # this read is the access that opened it
            armed.disarm()
            assert repo.ref().read_text() == repo.commit

        def test_register_race_rejects_bad_input():
            with pytest.raises(TypeError, match="expected a subclass of Race"):
                register_race("x", object)
            with pytest.raises(ValueError, match="invalid race name 'not a name'"):
                register_race("not a name", Truncator)
        """
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=3)


def test_windows_close_when_a_test_fails_or_times_out(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
        import os, time
        import pytest
        from pytest_startup_guard import on_access

        POINTERS = []

        @pytest.fixture(autouse=True)
        def report_pointers():
            yield
            print("POINTER-AFTER", POINTERS and os.path.islink(POINTERS[-1]))

        def test_fails_inside_window(hub_cache, hub_race):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            POINTERS.append(repo.pointer("config.json"))
            hub_race.arm("pointer_swap", repo, "config.json", trigger=on_access(hold=600))
            # The first look at the pointer opens the window, right before the look proceeds.
            assert not os.path.lexists(repo.pointer("config.json"))
            assert False, "the test fails with the window open"

        @pytest.mark.timeout(1, method="signal")
        def test_times_out_inside_window(hub_cache, hub_race):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            POINTERS.append(repo.pointer("config.json"))
            hub_race.arm("pointer_swap", repo, "config.json", trigger=on_access(hold=600))
            assert not os.path.lexists(repo.pointer("config.json"))
            time.sleep(30)
        """
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-p", "timeout", "-s")
    result.assert_outcomes(failed=2)
    assert result.stdout.str().count("POINTER-AFTER True") == 2


def test_chaos_refresher_races_for_the_whole_test_and_leaves_the_cache_whole(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        """
        import os, time
        import psutil
        from pytest_startup_guard import chaos

        def test_chaos(hub_cache, hub_race):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            armed = hub_race.arm("pointer_swap", repo, "config.json", trigger=chaos(gap=0.002, hold=0.002, seed=7))
            # The test process's children but the reaper (it holds the plan folder).
            refreshers = [
                child for child in psutil.Process().children()
                if "pytest_startup_guard.fleet.reaper" not in " ".join(child.cmdline())
            ]
            assert len(refreshers) == 1
            missing = 0
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                with open(repo.ref()) as handle:
                    handle.read()
                missing += not os.path.exists(repo.pointer("config.json"))
                time.sleep(0.0005)
            assert missing > 0
            assert len(hub_race.hits) > 0 and len(armed.windows) > 10
            assert all(w.closed_t >= w.opened_t for w in armed.windows)
            pytest_refresher = refreshers[0]
            hub_race.close()
            assert not pytest_refresher.is_running()
            assert os.path.islink(repo.pointer("config.json")) and os.path.exists(repo.pointer("config.json"))
        """
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)


def test_failures_print_seed_and_replay_command_and_the_seed_replays(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        """
        def test_seeded(hub_race):
            print("TEST-SEED", hub_race.seed)
            assert False
        """
    )
    first = guard_pytester.runpytest("-p", "startup_guard", "--startup-guard-seed=4242", "-s")
    second = guard_pytester.runpytest("-p", "startup_guard", "--startup-guard-seed=4242", "-s")
    other = guard_pytester.runpytest("-p", "startup_guard", "--startup-guard-seed=4243", "-s")
    first.stdout.fnmatch_lines(
        [
            "*replay: pytest -p startup_guard --startup-guard-seed=4242 test_failures_print_seed*::test_seeded"
        ]
    )

    def seed(result: pytest.RunResult) -> str:
        return (
            next(line for line in result.outlines if "TEST-SEED" in line)
            .split("TEST-SEED")[1]
            .split()[0]
        )

    assert seed(first) == seed(second) != seed(other)
