"""The child runtime reaches every Python process a test starts, and answers to the test side."""

from __future__ import annotations

import pytest

HELPERS = '''
import json, os, subprocess, sys, time
from pathlib import Path
import pytest

PROBE = str(Path(sys.executable).parent / "startup-guard-probe")
ITERATIONS = 50


@pytest.fixture
def toggled(hub_cache, child_runtime):
    """Removes the pointer right before a reader opens refs/main, restores it at RESTORE."""
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    restore = repo.path / "RESTORE"
    restore.write_text("x")
    pointer = repo.pointer("config.json")
    target = os.readlink(pointer)

    def listener(event):
        if event.op == "open" and event.path == str(repo.ref()):
            os.remove(pointer)
        elif event.op == "open" and event.path == str(restore):
            os.symlink(target, pointer)

    child_runtime.watch(hub_cache.hub_dir)
    child_runtime.add_listener(listener)
    return repo, pointer, restore


def run_member(child_runtime, command, env=None, timeout=60):
    """Start one fleet member held at the barrier, release it, wait for it."""
    group = child_runtime.barrier(1)
    process = subprocess.Popen(command, env={**os.environ, **group.member_env(0), **(env or {})})
    missing = group.wait_for_arrivals(time.monotonic() + 30, lambda i: process.poll() is None)
    assert not missing, f"member never arrived; exit code {process.poll()}"
    assert child_runtime.processes[process.pid].held
    group.release()
    assert process.wait(timeout=timeout) == 0
    return group, process.pid
'''

SUITE = (
    HELPERS
    + """

VIAS = ["direct", "spawn", "forkserver", "fork", "grandchild", "isolated"]


@pytest.mark.parametrize("via", VIAS)
def test_console_script_and_its_children_see_every_change(toggled, child_runtime, tmp_path, via):
    repo, pointer, restore = toggled
    out = tmp_path / "seen.json"
    group, member_pid = run_member(
        child_runtime,
        [PROBE, "--loop", str(repo.ref()), str(pointer), str(restore), str(ITERATIONS), "--via", via, "--out", str(out)],
    )
    result = json.loads(out.read_text())
    assert result["seen"] == [[False, True]] * ITERATIONS  # every time, 50 out of 50
    reader = result["identity"]["pid"]
    assert result["identity"]["member"] == f"{group.name}:0"
    events = child_runtime.accesses_of(reader)
    assert [Path(e.path).name for e in events] == ["main", "RESTORE"] * ITERATIONS
    assert {e.member for e in events} == {f"{group.name}:0"}
    assert events == sorted(events, key=lambda e: e.t)
    if via == "direct":
        assert reader == member_pid
    else:
        assert reader != member_pid
        assert member_pid in child_runtime.processes[reader].ancestry
    if via in ("fork", "forkserver"):
        assert child_runtime.processes[reader].forked


def test_plain_python_dash_c(toggled, child_runtime, tmp_path):
    repo, pointer, restore = toggled
    out = tmp_path / "seen.json"
    code = "import sys; from pytest_startup_guard.runtime.probe import main; sys.exit(main(sys.argv[1:]))"
    run_member(child_runtime, [sys.executable, "-c", code, "--loop", str(repo.ref()), str(pointer), str(restore), str(ITERATIONS), "--out", str(out)])
    assert json.loads(out.read_text())["seen"] == [[False, True]] * ITERATIONS


def test_users_sitecustomize_still_runs(toggled, child_runtime, tmp_path):
    repo, pointer, restore = toggled
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "sitecustomize-ran"
    (site / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('yes')\\n")
    out = tmp_path / "seen.json"
    env = {"PYTHONPATH": str(site) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run_member(child_runtime, [PROBE, "--loop", str(repo.ref()), str(pointer), str(restore), "5", "--out", str(out)], env=env)
    assert marker.read_text() == "yes"
    assert json.loads(out.read_text())["seen"] == [[False, True]] * 5


def test_resource_tracker_is_not_under_test(child_runtime, tmp_path):
    code = "import multiprocessing as mp; ctx = mp.get_context('spawn'); q = ctx.Queue(); q.put(1); q.get()"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    argvs = [" ".join(p.argv) for p in child_runtime.history]
    assert argvs and not any("resource_tracker" in a for a in argvs)
"""
)


def test_every_kind_of_child_is_reached_and_held_at_its_accesses(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(SUITE)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-v")
    result.assert_outcomes(passed=9)


def test_a_process_the_plan_never_reached_is_reported(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
        import subprocess, sys

        def test_python_without_site(child_runtime):
            process = subprocess.Popen([sys.executable, "-S", "-c", "pass"])
            child_runtime.expect(process.pid, "python -S")
            process.wait()
        """
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*plan never reached pid * (python -S)*"])


def test_barrier_releases_together_and_does_not_wait_for_a_member_that_never_comes(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        """
        import os, subprocess, sys, time

        def test_barrier(child_runtime):
            group = child_runtime.barrier(4)
            members = []
            for index in range(4):
                python = [sys.executable, "-S"] if index == 3 else [sys.executable]  # 3 never arrives
                code = "import time; time.sleep(0.5)" if index == 3 else "pass"
                env = {**os.environ, **group.member_env(index)}
                members.append(subprocess.Popen([*python, "-c", code], env=env))
            started = time.monotonic()
            missing = group.wait_for_arrivals(time.monotonic() + 3.0)
            waited = time.monotonic() - started
            assert missing == [3]
            assert 2.5 < waited < 10
            assert all(members[i].poll() is None for i in range(3))  # held at the barrier
            group.release()
            for process in members:
                assert process.wait(timeout=30) == 0
            records = [child_runtime.processes[members[i].pid] for i in range(3)]
            released = [r.released_t for r in records]
            assert all(t is not None and t >= group.released_t for t in released)
            assert max(released) - min(released) < 0.5
            # a late joiner of a released group passes straight through
            late = subprocess.run([sys.executable, "-c", "pass"], env={**os.environ, **group.member_env(3)}, timeout=30)
            assert late.returncode == 0
            assert child_runtime.members_reached(group.name) == {0, 1, 2, 3}
        """
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(("kind", "expected"), [("deadlock", "in take"), ("gil", "in _hang")])
def test_a_hung_child_yields_its_stacks(
    guard_pytester: pytest.Pytester, kind: str, expected: str
) -> None:
    guard_pytester.makepyfile(
        f"""
        import os, subprocess, sys, time
        from pathlib import Path

        PROBE = str(Path(sys.executable).parent / "startup-guard-probe")

        def test_dump(child_runtime):
            process = subprocess.Popen([PROBE, "--hang", "{kind}"], stdout=subprocess.PIPE, text=True)
            try:
                assert process.stdout.readline().startswith("hanging")
                time.sleep(0.5)
                stacks = child_runtime.dump_stacks(process.pid)
                assert stacks is not None
                print(stacks)
                assert "{expected}" in stacks
                assert process.poll() is None  # the dump did not kill it
            finally:
                process.kill()
                process.wait()
        """
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*hread 0x* (most recent call first):", "*File*runtime/probe.py*"])


def test_dump_request_to_a_process_without_the_runtime_never_kills_it(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        """
        import os, subprocess, sys, time
        from pytest_startup_guard.runtime.child import DUMP_SIGNAL

        def test_signal_before_registration(child_runtime):
            process = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(2)"])
            time.sleep(0.3)
            os.kill(process.pid, DUMP_SIGNAL)
            assert child_runtime.dump_stacks(process.pid) is None  # never said hello
            assert process.wait(timeout=10) == 0
        """
    )
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


def test_in_process_accesses_of_the_test_process(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
        import os

        def test_own_accesses(hub_cache, child_runtime):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            child_runtime.watch(hub_cache.hub_dir)
            child_runtime.watch_test_process()
            pointer = repo.pointer("config.json")
            child_runtime.add_listener(lambda e: e.path.endswith("refs/main") and os.remove(pointer))
            open(repo.ref()).read()
            assert not os.path.exists(pointer)
            (event,) = child_runtime.accesses
            assert (event.pid, event.member, event.op) == (os.getpid(), "test", "open")
            open("/dev/null").read()  # outside the watched folder: not reported
            assert len(child_runtime.accesses) == 1
        """
    )
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("ending", "code", "cycle_finalized"),
    [
        ("sys.exit(3)", 3, False),
        ("raise RuntimeError('boom')", 1, False),
        ("sys.exit(0)", 0, True),
        ("pass", 0, True),
    ],
)
def test_a_failing_exit_skips_the_collector_and_keeps_exit_code_and_handlers(
    guard_pytester: pytest.Pytester, ending: str, code: int, cycle_finalized: bool
) -> None:
    """A process under the runtime that exits with a failure freezes the collector after its
    own exit handlers (finalization after ``import transformers`` took 200 ms): its exit code
    and exit handlers stay, only objects in reference cycles are left to the OS. A clean exit
    is left as it is, and so is every process outside the runtime."""
    guard_pytester.makepyfile(
        f"""
        import os, subprocess, sys

        CHILD = (
            "import atexit, sys\\n"
            "class Noisy:\\n"
            "    def __del__(self): print('finalized cycle', flush=True)\\n"
            "cycle = Noisy()\\n"
            "cycle.me = cycle\\n"
            "atexit.register(lambda: print('exit handler ran', flush=True))\\n"
            "{ending}\\n"
        )

        def run(env):
            return subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60)

        def test_under_the_runtime(child_runtime):
            done = run({{**os.environ, **child_runtime.env}})
            assert child_runtime.history, "the child never reported in: not under the runtime"
            assert done.returncode == {code}, done.stderr
            lines = done.stdout.splitlines()
            assert "exit handler ran" in lines
            assert ("finalized cycle" in lines) is {cycle_finalized}, lines

        def test_outside_the_runtime_the_cycle_is_always_finalized():
            done = run({{k: v for k, v in os.environ.items() if not k.startswith("STARTUP_GUARD_")}})
            assert done.returncode == {code}
            assert "finalized cycle" in done.stdout.splitlines()
        """
    )
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=2)


def test_a_listener_that_cannot_listen_is_refused_where_it_is_given() -> None:
    from pytest_startup_guard import RuntimeController

    with RuntimeController() as controller:
        with pytest.raises(
            TypeError,
            match=r"invalid listener 3 for child_runtime.subscribe\(\): expected a RuntimeListener",
        ):
            controller.subscribe(3)  # type: ignore[arg-type]
        with pytest.raises(
            TypeError,
            match=r"invalid listener 'x' for child_runtime.add_listener\(\): expected a function",
        ):
            controller.add_listener("x")  # type: ignore[arg-type]


# What a child process loads at interpreter start, besides the modules every interpreter has
# loaded by then: the boot hook and, through it, the whole child package.
CHILD_START = ("pytest_startup_guard.runtime.boot", "pytest_startup_guard.runtime.child")
# Pure-Python standard modules a child may still load: ``from __future__ import annotations``.
CHILD_START_ALLOWED = {"__future__"}


def test_child_side_modules_load_built_in_modules_only() -> None:
    """Every module a child imports at interpreter start (``runtime/boot.py``, every module of
    ``runtime/child/``, ``observation``, ``protocol`` and the package ``__init__`` files) loads
    built-in or extension modules only: json, socket, threading or typing would add tens of
    milliseconds to each process's start."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import pytest_startup_guard.runtime.child as child_package

    code = (
        "import sys; before = set(sys.modules)\n"
        + "".join(f"import {name}\n" for name in CHILD_START)
        + "new = sorted(set(sys.modules) - before)\nimport json\n"
        "print(json.dumps({name: getattr(sys.modules[name], '__file__', None) for name in new}))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    ours = {name for name in loaded if name.split(".")[0] == "pytest_startup_guard"}
    children = {
        f"pytest_startup_guard.runtime.child.{path.stem}"
        for path in Path(child_package.__file__).parent.glob("*.py")
        if path.stem != "__init__"
    }
    assert children <= ours, f"not loaded at start: {sorted(children - ours)}"
    pure_python = {
        name
        for name, file in loaded.items()
        if name not in ours
        and file is not None
        and file.endswith(".py")
        and name not in CHILD_START_ALLOWED
    }
    assert not pure_python, f"a child's start loads {sorted(pure_python)}"
