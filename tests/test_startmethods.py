"""Start methods and an environment variable's documented choices (issue 9)."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_startup_guard import (
    UnknownNameError,
    check_env_choices,
    check_start_methods,
)
from pytest_startup_guard.imports.startmethods import StartupSpecError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "imports"
APP = [EXAMPLES]
DOCUMENTED = ["spawn", "fork"]
UNDOCUMENTED = ["forkserver", "bogus"]


def outcome(result: object) -> list[tuple[str, bool]]:
    return [(run.label, run.passed) for run in result.runs]  # type: ignore[attr-defined]


def test_unguarded_set_start_method_fails_only_when_one_is_already_set() -> None:
    result = check_start_methods("acme_server.bad_multiproc:main", pythonpath=APP)
    assert outcome(result) == [
        ("default spawn", True),
        ("default fork", True),
        ("default forkserver", True),
        ("already set (spawn)", False),
    ]
    failed = result.runs[3]
    assert failed.returncode == 1 and failed.error == "RuntimeError: context has already been set"
    assert all(run.started_with == ("spawn",) for run in result.runs[:3])
    with pytest.raises(AssertionError) as caught:
        result.assert_safe()
    message = str(caught.value)
    assert "start methods of acme_server.bad_multiproc:main: 1 of 4 modes failed" in message
    assert len(re.findall(r"^  [1-4] ", message, re.MULTILINE)) == 4  # every mode, not the first
    assert re.search(r"4 +already set \(spawn\) +start +FAIL .* RuntimeError: context has", message)
    assert "--- run 4 (already set (spawn)): output tail ---" in message
    assert "raise RuntimeError('context has already been set')" in message
    assert caught.traceback[-1].ishidden(caught)


def test_the_guarded_start_up_passes_every_mode() -> None:
    result = check_start_methods("acme_server.good_multiproc:main", pythonpath=APP)
    assert outcome(result) == [
        ("default spawn", True),
        ("default fork", True),
        ("default forkserver", True),
        ("already set (spawn)", True),
    ]
    result.assert_safe()


def test_each_default_start_method_is_really_in_force() -> None:
    # fork_only starts its worker with the default context: what it started with is the mode.
    result = check_start_methods("acme_server.fork_only:main", pythonpath=APP)
    assert [run.started_with for run in result.runs] == [
        ("spawn",),
        ("fork",),
        ("forkserver",),
        ("spawn",),
    ]
    assert outcome(result) == [
        ("default spawn", False),
        ("default fork", True),
        ("default forkserver", False),
        ("already set (spawn)", False),
    ]
    assert "Can't pickle local object 'main.<locals>.child'" in result.runs[0].error


def test_start_ups_as_argv_script_and_function_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_module = check_start_methods(
        [sys.executable, "-m", "acme_server.bad_multiproc"],
        methods=["already_set"],
        already_set="fork",
        cwd=EXAMPLES,
    )
    assert outcome(as_module) == [("already set (fork)", False)]
    assert as_module.runs[0].error == "RuntimeError: context has already been set"
    as_script = check_start_methods(
        [sys.executable, str(EXAMPLES / "acme_server" / "good_multiproc.py")],
        methods=["fork", "already_set"],
    )
    assert outcome(as_script) == [("default fork", True), ("already set (spawn)", True)]
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from acme_server.good_multiproc import main

    as_object = check_start_methods(main, methods=["spawn"], pythonpath=APP)
    assert as_object.startup == "acme_server.good_multiproc:main"
    assert outcome(as_object) == [("default spawn", True)]


def test_documented_choices_and_code_disagree_in_the_incident() -> None:
    result = check_env_choices(
        "acme_server.bad_multiproc:main",
        "ACME_START_METHOD",
        DOCUMENTED,
        unlisted=UNDOCUMENTED,
        pythonpath=APP,
    )
    assert outcome(result) == [
        ("ACME_START_METHOD='spawn'", True),
        ("ACME_START_METHOD='fork'", True),
        ("ACME_START_METHOD='forkserver'", False),
        ("ACME_START_METHOD='bogus'", False),
        ("ACME_START_METHOD unset", True),
    ]
    assert [run.started_with for run in result.runs] == [
        ("spawn",),
        ("fork",),
        ("forkserver",),
        (),
        ("spawn",),
    ]
    assert result.runs[2].problem == (
        "unlisted value 'forkserver' accepted silently: the start-up exited 0"
    )
    assert result.runs[3].problem == (
        "unclear error (names neither ACME_START_METHOD nor 'bogus' with an accepted value):"
        " ValueError: cannot find context for 'bogus'"
    )
    with pytest.raises(AssertionError) as caught:
        result.assert_agree()
    message = str(caught.value)
    assert message.startswith(
        "ACME_START_METHOD's documented choices and the code that reads it disagree\n"
        "ACME_START_METHOD of acme_server.bad_multiproc:main: documented spawn, fork;"
        " 2 of 5 runs disagree"
    )
    assert len(re.findall(r"^  [1-5] ", message, re.MULTILINE)) == 5
    assert caught.traceback[-1].ishidden(caught)


def test_documented_choices_and_code_agree_after_the_fix() -> None:
    result = check_env_choices(
        "acme_server.good_multiproc:main",
        "ACME_START_METHOD",
        DOCUMENTED,
        unlisted=UNDOCUMENTED,
        pythonpath=APP,
    )
    assert all(run.passed for run in result.runs), result
    assert result.runs[3].error == (
        "invalid ACME_START_METHOD 'bogus': expected one of spawn, fork"
    )
    result.assert_agree()


def write_startup(folder: Path, name: str, body: str) -> str:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))
    return f"{name}:main"


def test_a_value_the_code_ignores_and_a_custom_match(tmp_path: Path) -> None:
    startup = write_startup(
        tmp_path,
        "ignores_it",
        """
        import multiprocessing, os, sys
        def _child():
            pass
        def main():
            value = os.environ.get("MODE", "spawn")
            if value not in ("spawn", "fork"):
                sys.exit(f"unsupported mode {value}")
            worker = multiprocessing.get_context("spawn").Process(target=_child)
            worker.start()
            worker.join()
        """,
    )
    result = check_env_choices(startup, "MODE", ["spawn", "fork"], pythonpath=[tmp_path])
    assert outcome(result) == [
        ("MODE='spawn'", True),
        ("MODE='fork'", False),
        ("MODE='startup-guard-unlisted-value'", False),
        ("MODE unset", True),
    ]
    assert result.runs[1].problem == "started its processes with spawn, not the 'fork' it was given"
    assert result.runs[2].problem is not None and result.runs[2].problem.startswith("unclear error")
    matched = check_env_choices(
        startup, "MODE", ["spawn"], unset=False, match=r"unsupported mode", pythonpath=[tmp_path]
    )
    assert outcome(matched) == [
        ("MODE='spawn'", True),
        ("MODE='startup-guard-unlisted-value'", True),
    ]


def test_hanging_is_failing_and_a_ready_start_up_is_stopped(tmp_path: Path) -> None:
    startup = write_startup(
        tmp_path,
        "server",
        """
        import os, subprocess, sys, time
        def main():
            child = subprocess.Popen(["sleep", "300"])
            print("pids", os.getpid(), child.pid, flush=True)
            if os.environ.get("SERVER_MODE", "ok") != "ok":
                time.sleep(300)  # hangs instead of failing on a bad value
            print("listening", flush=True)
            time.sleep(300)
        """,
    )
    started = time.perf_counter()
    result = check_env_choices(
        startup,
        "SERVER_MODE",
        ["ok"],
        unset=False,
        ready=r"^listening",
        timeout=3,
        pythonpath=[tmp_path],
    )
    assert time.perf_counter() - started < 20
    assert outcome(result) == [
        ("SERVER_MODE='ok'", True),
        ("SERVER_MODE='startup-guard-unlisted-value'", False),
    ]
    ready, hung = result.runs
    assert ready.ready and ready.returncode is None and ready.seconds < 3
    assert hung.problem == "did not finish within 3 s (killed); hanging is failing"
    for run in result.runs:
        pids = [int(pid) for pid in re.search(r"pids (\d+) (\d+)", run.output_tail).groups()]  # type: ignore[union-attr]
        for pid in pids:
            assert (
                not Path(f"/proc/{pid}").exists()
                or "zombie" in Path(f"/proc/{pid}/status").read_text()
            ), f"process {pid} outlived the check"


def test_a_start_up_that_ignores_pythonpath_is_reported_not_passed() -> None:
    result = check_start_methods([sys.executable, "-I", "-c", "print('hello')"], methods=["spawn"])
    [run] = result.runs
    assert not run.passed and run.problem is not None
    assert run.problem.startswith("the start-up's interpreter never applied the mode")


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: check_start_methods("m:f", methods=["spwan"]),
            UnknownNameError,
            "unknown start method 'spwan' in methods= of check_start_methods (did you mean"
            " 'spawn'?); known start methods: already_set, fork, forkserver, spawn",
        ),
        (
            lambda: check_start_methods("m:f", already_set="threads"),
            UnknownNameError,
            "unknown start method 'threads' in already_set= of check_start_methods",
        ),
        (
            lambda: check_start_methods("python -m server"),
            StartupSpecError,
            "start-up 'python -m server' given to check_start_methods is not"
            " 'package.module:function'",
        ),
        (
            lambda: check_start_methods(lambda: None),
            StartupSpecError,
            "start-up <function <lambda>",
        ),
        (
            lambda: check_start_methods([]),
            StartupSpecError,
            "start-up [] given to check_start_methods: expected a non-empty list of strings",
        ),
        (
            lambda: check_env_choices("m:f", "NOT A NAME", ["a"]),
            StartupSpecError,
            "variable 'NOT A NAME' given to check_env_choices: expected an environment variable",
        ),
        (
            lambda: check_env_choices("m:f", "MODE", ["spawn", "fork"], unlisted=["fork"]),
            StartupSpecError,
            "unlisted= of check_env_choices('MODE') repeats allowed values ['fork']",
        ),
        (
            lambda: check_env_choices("m:f", "MODE", []),
            StartupSpecError,
            "allowed= of check_env_choices('MODE') is empty",
        ),
        (
            lambda: check_start_methods("m:f", python="/nonexistent/python"),
            ValueError,
            "python '/nonexistent/python' given to check_start_methods is not an executable",
        ),
    ],
)
def test_bad_arguments_name_the_value_and_what_is_accepted(
    call: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        call()  # type: ignore[operator]
    assert str(caught.value).startswith(message), str(caught.value)


def test_example_tests_pass_and_fail_as_documented(guard_pytester: pytest.Pytester) -> None:
    shutil.copytree(EXAMPLES / "acme_server", guard_pytester.path / "acme_server")
    shutil.copy(EXAMPLES / "test_start_methods.py", guard_pytester.path)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-rx")
    result.assert_outcomes(passed=2, xfailed=3)
    shown = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-k", "unguarded or forkserver", "--runxfail"
    )
    shown.assert_outcomes(failed=2, deselected=3)
    shown.stdout.fnmatch_lines(
        [
            "*start methods of acme_server.bad_multiproc:main: 1 of 4 modes failed",
            "*4*already set (spawn)*start*FAIL*RuntimeError: context has already been set",
        ]
    )
    shown.stdout.fnmatch_lines(
        [
            "*ACME_START_METHOD='forkserver'*fail clearly*FAIL*accepted silently*",
            "*ACME_START_METHOD='bogus'*fail clearly*FAIL*unclear error*",
        ]
    )
