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
        (
            'transient=["pointer_swap"], hold=-1',
            "invalid hold=-1 for @pytest.mark.startup_races of *::test_x: expected a non-negative number of seconds",
        ),
        (
            'transient=["pointer_swap"], hold="fast"',
            "invalid hold='fast' for @pytest.mark.startup_races of *::test_x: expected a non-negative number of seconds",
        ),
        (
            'transient=["pointer_swap"], trigger="on_access"',
            "invalid trigger='on_access' for @pytest.mark.startup_races of *::test_x: expected on_access(...), after(...) or chaos(...) from pytest_startup_guard",
        ),
        (
            'transient=["pointer_swap"], trigger=placed()',
            "invalid trigger=Placed() for @pytest.mark.startup_races of *::test_x: placed() leaves the fault for the whole test, which no start-up can survive: expected on_access(...)*",
        ),
        (
            'transient=["pointer_swap"], hold=0.1, trigger=on_access(hold=0.2)',
            "hold=0.1 and trigger=on_access(hold=0.2) in @pytest.mark.startup_races of *::test_x both set how long the window stays open: give the hold once*",
        ),
        (
            'corrupt=["empty"], hold=0.1',
            "hold=0.1 in @pytest.mark.startup_races of *::test_x sets the window of transient cases, and this marker names none*",
        ),
        (
            'transient=["pointer_swap"], explore=True, trigger=on_access(nth=2)',
            "trigger=OnAccess(nth=2, *) in @pytest.mark.startup_races of *::test_x: explore=True opens a window at every access point with the exploration's own hold (0.5 s)*",
        ),
    ],
)
def test_bad_marker_arguments_fail_at_collection(
    guard_pytester: pytest.Pytester, marker: str, message: str
) -> None:
    guard_pytester.makepyfile(
        f"""
        import pytest
        from pytest_startup_guard import on_access, placed

        @pytest.mark.startup_races({marker})
        def test_x(startup_case):
            pass
        """
    )
    # In a subprocess: an in-process run re-imports the plugin, not the names the test imports.
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
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
        "server 0 (pid *) could not be judged: it started up, but was never seen to read"
        " config.json, in a window or out of one",
        "startup_case transient-pointer_swap on config.json of acme/tiny@main: the start-up could"
        " not be judged, so it is not green:",
        "root cause: pid * met pointer_swap: config.json gone (its pointer removed, not yet"
        " re-created), at its open of snapshots/*/config.json at +* s; then it exited with code 1",
        "server 0 came up on a corrupt config.json (empty): it hid the corruption",
        "server 0 hung: still running on a corrupt config.json (ready.http(*) not ready after 3 s*); hanging is failing",
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
                # It looks at the config's pointer, finds none and falls back to a default.
                assert_survives(lambda: repo.pointer("config.json").exists() or {"model_type": "fallback"}, armed, expect=lambda c: c["model_type"] == "gpt2")

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


WINDOWS = """
import json, sys
import pytest
from pytest_startup_guard import on_access, ready

CONFIG = {"config.json": {"model_type": "gpt2"}}

def launch(server_fleet, policy, count=3):
    return server_fleet.launch(
        [sys.executable, "stub.py", policy, "{port}", "acme/tiny"], count=count, timeout=10,
        ready=ready.http("/", expect=lambda body: json.loads(body)["model_type"] == "gpt2"),
    )

@pytest.mark.startup_races(transient="all")
@pytest.mark.parametrize("policy", ["realistic_retry", "naive"])
def test_default(startup_case, hub_cache, server_fleet, policy):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    startup_case.apply(repo, "config.json")
    startup_case.check(launch(server_fleet, policy))

@pytest.mark.startup_races(transient=["pointer_swap"], hold=0.6)
def test_marker_hold(startup_case, hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    startup_case.apply(repo, "config.json")
    assert startup_case.armed.trigger == on_access(hold=0.6)
    startup_case.check(launch(server_fleet, "realistic_retry", count=1))

@pytest.mark.startup_races(transient=["ref_rewrite"], trigger=on_access(hold=0.6))
def test_marker_trigger(startup_case, hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    startup_case.apply(repo, "config.json")
    startup_case.check(launch(server_fleet, "realistic_retry", count=1))

@pytest.mark.startup_races(transient=["pointer_swap"], hold=0.05)
def test_apply_trigger(startup_case, hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    startup_case.apply(repo, "config.json", trigger=on_access(nth=2))
    assert startup_case.armed.trigger == on_access(nth=2, hold=0.05)  # the marker's hold fills it
    startup_case.check(launch(server_fleet, "realistic_retry", count=1))

@pytest.mark.startup_races(transient=["blob_rewrite"])
def test_apply_hold_outlasts_the_retry(startup_case, hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    startup_case.apply(repo, "config.json", trigger=on_access(hold=0.6))
    startup_case.check(launch(server_fleet, "realistic_retry", count=1))
"""


def test_windows_model_the_writer(verdict_pytester: pytest.Pytester) -> None:
    """At default settings a realistic retry (3 tries, 0.1 s then 0.2 s) survives every race of
    ``transient="all"`` and a single try does not; hold= and trigger= in the marker and in
    apply() take effect, and a failure says how long the window was open and the retry took."""
    verdict_pytester.makepyfile(test_windows=WINDOWS)
    result = verdict_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "xdist", "-n", "2", "-rA"
    )
    outcomes = {}
    for line in result.outlines:
        for word in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(word + " ") and "::test_" in line:
                outcomes[line.split("::", 1)[1].split(" ")[0]] = word
    races = ["pointer_swap", "ref_rewrite", "blob_rewrite", "dangling_pointer"]
    assert outcomes == {
        **{f"test_default[transient-{race}-realistic_retry]": "PASSED" for race in races},
        **{f"test_default[transient-{race}-naive]": "FAILED" for race in races},
        "test_marker_hold[transient-pointer_swap]": "FAILED",
        "test_marker_trigger[transient-ref_rewrite]": "FAILED",
        "test_apply_trigger[transient-pointer_swap]": "PASSED",
        "test_apply_hold_outlasts_the_retry[transient-blob_rewrite]": "FAILED",
    }
    # a single try met a ~20 ms window (of its own time: longer in wall time on a busy
    # machine) and gave up inside it
    result.stdout.fnmatch_lines(
        [
            "*server * did not survive the race: EXITED with code 1 after * s, before it was"
            " ready; pid * met *: config.json * in window * opened at +* s, closed at +* s: open for * ms; it"
            " retried for * ms (from its first hit at +* s to its last read of config.json at +* s): it gave up while"
            " the window was still open: a start-up must retry for longer than the window stays"
            " open (times from the fleet's release)*",
        ]
    )
    # hold=0.6: three tries over 0.3 s meet a window of 600 ms (or more, on a busy machine)
    result.stdout.fnmatch_lines(
        [
            "*server 0 did not survive the race: EXITED with code 1 after * s, before it was"
            " ready; pid * met pointer_swap: config.json gone (its pointer removed, not yet"
            " re-created) in window 1 opened at +* s, closed at +* s: open for * ms; it"
            " retried for * s (from its first hit at * to its last read of config.json at *): it gave up while the"
            " window was still open*",
        ]
    )


def test_every_reader_of_the_raced_file_must_be_hit(verdict_pytester: pytest.Pytester) -> None:
    """The per-member rule is met (the member's main process was hit), but its worker read the
    file after the window closed: the case proves nothing for the worker, and says why."""
    verdict_pytester.makepyfile(
        spawner="""
        import http.server, os, subprocess, sys, time
        port, repo = int(sys.argv[1]), sys.argv[2]
        folder = os.path.join(os.environ["HF_HUB_CACHE"], "models--" + repo.replace("/", "--"))
        def load():
            with open(os.path.join(folder, "refs", "main")) as ref:
                commit = ref.read()
            path = os.path.join(folder, "snapshots", commit, "config.json")
            open(path).read()
            return path
        for attempt in range(3):
            try:
                path = load()
                break
            except OSError:
                time.sleep(0.1 * 2**attempt)
        time.sleep(0.3)  # a worker starts late and reads the config once: its first access
        subprocess.run([sys.executable, "-c", "import sys; open(sys.argv[1]).read()", path], check=True)
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200); self.end_headers()
            def log_message(self, *args):
                pass
        http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
        """,
        test_late_reader="""
        import sys
        import pytest
        from pytest_startup_guard import on_access, ready

        @pytest.mark.startup_races(transient=["pointer_swap"], trigger=on_access(nth=2))
        def test_late_reader(startup_case, hub_cache, server_fleet):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            startup_case.apply(repo, "config.json")
            fleet = server_fleet.launch([sys.executable, "spawner.py", "{port}", "acme/tiny"],
                                        count=1, timeout=10, ready=ready.http("/"))
            assert fleet.servers[0].ready and fleet.servers[0].hits
            startup_case.check(fleet)
        """,
    )
    result = verdict_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*startup_case transient-pointer_swap on config.json of acme/tiny@main: the start-up"
            " was expected to have survived, but:",
            "*  - pid * (server 0) read config.json at +0.* s, after the window closed at +0.* s:"
            " the race never hit it, so surviving proves nothing for it*(times from the fleet's"
            " release)",
        ]
    )
    assert "the race never hit server 0" not in result.stdout.str()


def test_bad_trigger_in_apply(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
        import pytest
        from pytest_startup_guard import StartupGuardError, on_access

        @pytest.mark.startup_races(transient=["pointer_swap"], corrupt=["empty"])
        def test_x(startup_case, hub_cache):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            if startup_case.kind == "transient":
                with pytest.raises(ValueError, match=r"invalid trigger=0.5 for startup_case.apply\\(\\) of case transient-pointer_swap: expected on_access\\(...\\), after\\(...\\) or chaos\\(...\\)"):
                    startup_case.apply(repo, "config.json", trigger=0.5)
            else:
                with pytest.raises(StartupGuardError, match=r"invalid trigger=.* for startup_case.apply\\(\\) of case corrupt-empty: a corruption is written once and stays, so it takes no trigger"):
                    startup_case.apply(repo, "config.json", trigger=on_access())
            assert not startup_case.applied
        """
    )
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=2)
