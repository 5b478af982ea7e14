"""File-system errors (``fs_error``, ``network_fs``) and every file operation as an access point,
run as users run them: pytester writes the test, real processes make the calls."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys

import pytest

# A member that makes each call named in its argv and records what each raised, as JSON lines
# in OUT: (operation, errno, strerror, filename, filename2, exception type) or "ok".
CALLER = r"""
import fcntl, json, os, sys
out, folder, *calls = sys.argv[1:]
def record(name, func):
    try:
        func()
        result = {"op": name, "ok": True}
    except OSError as error:
        result = {"op": name, "errno": error.errno, "strerror": error.strerror,
                  "filename": error.filename, "filename2": error.filename2,
                  "type": type(error).__name__}
    with open(out, "a") as handle:
        handle.write(json.dumps(result) + "\n")
def lock(how):
    with open(os.path.join(folder, "the.lock"), "a+") as handle:
        if how == "flock":
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        else:
            fcntl.lockf(handle.fileno(), fcntl.LOCK_EX)
CALLS = {
    "open": lambda: open(os.path.join(folder, "data.json")).close(),
    "rename": lambda: os.replace(os.path.join(folder, "data.json"), os.path.join(folder, "moved.json")),
    "mkdir": lambda: os.mkdir(os.path.join(folder, "made")),
    "rmdir": lambda: os.rmdir(os.path.join(folder, "empty")),
    "remove": lambda: os.remove(os.path.join(folder, "gone.txt")),
    "flock": lambda: lock("flock"),
    "lockf": lambda: lock("lockf"),
    "listdir": lambda: os.listdir(folder),
}
for name in calls:
    record(name, CALLS[name])
print("done", flush=True)
import time
time.sleep(60)  # a server: it runs until the fleet stops it
"""

PRELUDE = f"""
import json, os, sys
from pathlib import Path
import pytest
from pytest_startup_guard import fs_error, network_fs, ready

CALLER = {CALLER!r}


def prepare(folder):
    folder.mkdir(exist_ok=True)
    (folder / "data.json").write_text("{{}}")
    (folder / "empty").mkdir(exist_ok=True)
    (folder / "gone.txt").write_text("x")


def caller(tmp_path, folder, *calls):
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    out = tmp_path / "out-{{index}}.jsonl"
    return [sys.executable, str(script), str(out), str(folder), *calls], out


def results(out, index=0):
    path = Path(str(out).replace("{{index}}", str(index)))
    return [json.loads(line) for line in path.read_text().splitlines()]
"""

OPS = ("open", "rename", "mkdir", "rmdir", "remove", "flock", "lockf")
ERRNOS = ("ESTALE", "EBUSY", "EIO", "ENOSPC", "EACCES", "ENOSYS", "EBADF")


def test_each_call_fails_with_the_error_the_system_call_gives(
    guard_pytester: pytest.Pytester,
) -> None:
    """Every operation, each with another of the usual errnos: the member sees errno,
    strerror, the path(s) as it gave them and the subclass OSError picks."""
    pairs = list(zip(OPS, ERRNOS, strict=True))
    guard_pytester.makepyfile(
        PRELUDE
        + f"""
PAIRS = {pairs!r}


def test_errors(shared_dir, tmp_path, server_fleet):
    folder = shared_dir / "cache"
    prepare(folder)
    command, out = caller(tmp_path, folder, *[op for op, _ in PAIRS])
    faults = []
    for op, name in PAIRS:
        target = folder / "the.lock" if op in ("flock", "lockf") else folder
        faults.append(fs_error(name, target, op=op))
    fleet = server_fleet.launch(command, count=1, ready=ready.log("done"), faults=faults)
    fleet.assert_all_ready()
    print("RESULTS", json.dumps(results(out)))
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=1)
    found = re.search(r"RESULTS (\[.*\])$", result.stdout.str(), re.MULTILINE)
    assert found, result.stdout.str()
    seen = {entry["op"]: entry for entry in json.loads(found.group(1))}
    folder = str(guard_pytester.path)  # only a prefix check: the folder is pytest's
    for op, name in pairs:
        number = getattr(errno, name)
        entry = seen[op]
        assert entry.get("errno") == number, (op, entry)
        assert entry["strerror"] == os.strerror(number)
        assert entry["type"] == type(OSError(number, "x")).__name__
        if op in ("flock", "lockf"):
            assert entry["filename"] is None  # a descriptor's call names no path
        else:
            assert entry["filename"].startswith("/") and "cache" in entry["filename"]
        if op == "rename":
            assert entry["filename2"].endswith("moved.json")
    assert folder


def test_nth_and_times_pick_the_same_calls_in_every_run(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        PRELUDE
        + """
@pytest.mark.parametrize("nth, times, failing", [
    (1, 1, [0]), (2, 2, [1, 2]), (3, None, [2, 3, 4, 5]),
])
def test_counts(shared_dir, tmp_path, server_fleet, nth, times, failing):
    folder = shared_dir / "cache"
    prepare(folder)
    command, out = caller(tmp_path, folder, *["open"] * 6)
    fault = fs_error("EIO", folder / "data.json", nth=nth, times=times)
    fleet = server_fleet.launch(command, count=1, ready=ready.log("done"), faults=[fault])
    fleet.assert_all_ready()
    failed = [i for i, entry in enumerate(results(out)) if not entry.get("ok")]
    assert failed == failing
    [armed] = fleet.faults  # every fault given, whatever its family
    assert armed.failed and armed.met and armed.effects[0].member == 0
    assert "6 call(s)" not in fleet.summary() or times is None
"""
    )
    guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "xdist", "-n", "2"
    ).assert_outcomes(passed=3)


def test_member_picks_whose_calls_fail(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        PRELUDE
        + """
def test_one_member(shared_dir, tmp_path, server_fleet):
    folder = shared_dir / "cache"
    prepare(folder)
    command, out = caller(tmp_path, folder, "open")
    fault = fs_error("ESTALE", folder, member=1, times=None)
    fleet = server_fleet.launch(command, count=2, ready=ready.log("done"), faults=[fault])
    fleet.assert_all_ready()
    assert results(out, 0) == [{"op": "open", "ok": True}]
    assert results(out, 1)[0]["errno"] == 116
"""
    )
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


def test_a_fault_never_met_fails_the_launch_and_says_why(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        PRELUDE
        + """
def test_untouched(shared_dir, tmp_path, server_fleet):
    folder = shared_dir / "cache"
    prepare(folder)
    command, out = caller(tmp_path, folder, "open")
    server_fleet.launch(command, count=1, ready=ready.log("done"),
                        faults=[fs_error("EBUSY", folder / "other.json")])


def test_wrong_op(shared_dir, tmp_path, server_fleet):
    folder = shared_dir / "cache"
    prepare(folder)
    command, out = caller(tmp_path, folder, "open")
    server_fleet.launch(command, count=1, ready=ready.log("done"),
                        faults=[fs_error("EBUSY", folder, op="rmdir")])


def test_allowed(shared_dir, tmp_path, server_fleet):
    folder = shared_dir / "cache"
    prepare(folder)
    command, out = caller(tmp_path, folder, "open")
    fleet = server_fleet.launch(command, count=1, ready=ready.log("done"),
                                faults=[fs_error("EBUSY", folder, op="rmdir", allow_miss=True)])
    fleet.assert_all_ready()
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.re_match_lines(
        [
            r".*fs_error\('EBUSY', '.*other.json'\) \(faults\[0\] of server_fleet.launch\(\)\)"
            " was never met: no process of the fleet touched",
            r".*fs_error\('EBUSY', '.*cache', op='rmdir'\) \(faults\[0\] of"
            r" server_fleet.launch\(\)\) was never met: the fleet's processes made open there,"
            " never the op asked",
        ]
    )


def test_a_path_outside_the_tests_folders_is_refused(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        PRELUDE
        + """
def test_outside(server_fleet):
    server_fleet.launch([sys.executable, "-c", "pass"], count=1, ready=ready.log("done"),
                        faults=[fs_error("EIO", "/etc/hostname")])
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r".*fs_error\('EIO', '/etc/hostname'\) \(faults\[0\] of server_fleet.launch\(\)\):.*"
            "not under a folder the plugin owns for this test"
        ]
    )


def test_a_listing_of_the_raced_folder_itself_is_an_access(
    guard_pytester: pytest.Pytester,
) -> None:
    """``os.listdir(folder)`` (Triton's ``CompiledKernel`` lists a kernel's folder) opens the
    window of a race on a file in it and meets it, and each file operation is an access with
    its own op: the window opens at the operation ``on_access(op=...)`` names."""
    guard_pytester.makepyfile(
        """
import os, subprocess, sys
from pytest_startup_guard import on_access

LIST = "import os, sys; print(sorted(os.listdir(sys.argv[1])))"
PUT = (
    "import os, sys; folder = sys.argv[1]\\n"
    "for _ in range(3): open(os.path.join(folder, 'kernel.json')).close()\\n"
    "os.mkdir(os.path.join(folder, 'tmp'))\\n"
    "open(os.path.join(folder, 'tmp', 'k.json'), 'w').close()\\n"
    "os.replace(os.path.join(folder, 'tmp', 'k.json'), os.path.join(folder, 'k2.json'))\\n"
    "os.rmdir(os.path.join(folder, 'tmp'))\\n"
)


def test_listing(shared_dir, hub_race):
    folder = shared_dir / "kernels"
    folder.mkdir()
    (folder / "kernel.json").write_text("{}")
    armed = hub_race.arm_path("file_replace", folder / "kernel.json", trigger=on_access(hold=1.0))
    listed = subprocess.run([sys.executable, "-c", LIST, str(folder)], capture_output=True,
                            text=True, check=True)
    assert listed.stdout.strip() == "[]"  # it listed the folder inside the window
    assert [hit.op for hit in armed.hits] == ["os.listdir"]
    assert armed.hits[0].path == str(folder)


def test_rename(shared_dir, hub_race, child_runtime):
    folder = shared_dir / "kernels"
    folder.mkdir()
    (folder / "kernel.json").write_text("{}")
    armed = hub_race.arm_path("file_replace", folder / "kernel.json",
                              trigger=on_access(op="replace", hold=0.2), allow_miss=True)
    subprocess.run([sys.executable, "-c", PUT, str(folder)], check=True)
    # The window opened at the replace, which moves another file: it met nothing, no hit.
    rename_pid = next(e.pid for e in child_runtime.accesses if e.op == "os.rename")
    assert [w.opened_by for w in armed.windows] == [rename_pid] and not armed.hits
    ops = [event.op for event in child_runtime.accesses if str(folder) in event.path]
    assert ops == ["open"] * 3 + ["os.mkdir", "open", "os.rename", "os.rmdir"]
    rename = next(e for e in child_runtime.accesses if e.op == "os.rename")
    assert rename.path.endswith("tmp/k.json") and rename.other.endswith("k2.json")
"""
    )
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=2)


def test_network_fs_gives_a_stale_handle_to_the_member_whose_folder_was_replaced(
    guard_pytester: pytest.Pytester,
) -> None:
    """Member 0 moves the kernel folder aside while member 1 still uses it: member 1's next
    read gets ESTALE; a server that retries survives; member 0 itself sees nothing."""
    examples = os.path.join(os.path.dirname(__file__), "..", "examples")
    guard_pytester.makepyfile(
        f"""
import json, sys
import pytest
sys.path.insert(0, {os.path.abspath(examples)!r})
from faults import KERNEL, shared_fs_server
from pytest_startup_guard import network_fs, ready


@pytest.mark.parametrize("policy", ["naive", "retry"])
def test_rotation(shared_dir, server_fleet, policy):
    (shared_dir / "kernels").mkdir()
    (shared_dir / "kernels" / "matmul.json").write_text(json.dumps(KERNEL))
    fleet = server_fleet.launch(shared_fs_server(shared_dir, policy, rotate_by=0), count=2,
                                ready=ready.http("/health"), timeout=8,
                                faults=network_fs(shared_dir))
    summary = fleet.summary()
    assert "stale: pid" in summary and "(member 1)" in summary and "-> ESTALE" in summary
    nfs, locks = fleet.faults  # every fault given, in order: network_fs gives two
    assert nfs.met and "ESTALE" in nfs.cause(1) and not locks.miss()
    assert any(effect.member == 1 and "ESTALE" in effect.what for effect in nfs.effects)
    assert fleet.servers[0].ready
    if policy == "naive":
        assert not fleet.servers[1].ready
        assert "ESTALE (stale: member 0 replaced" in fleet.servers[1].reason
    else:
        fleet.assert_all_ready()


def test_nothing_replaced(shared_dir, server_fleet):
    (shared_dir / "kernels").mkdir()
    (shared_dir / "kernels" / "matmul.json").write_text(json.dumps(KERNEL))
    server_fleet.launch(shared_fs_server(shared_dir, "naive"), count=2,
                        ready=ready.http("/health"), timeout=8, faults=network_fs(shared_dir))
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.re_match_lines(
        [r".*network_fs\('.*'\) \(faults\[0\] of server_fleet.launch\(\)\) was never met"]
    )


def test_a_failed_call_is_the_real_errors_twin() -> None:
    """Without the plugin: the errors the faults give are those of the real calls (the same
    type, errno, message and filename), checked on calls that really fail here."""
    script = (
        "import os, json\n"
        "try:\n    os.rmdir('/definitely/not/here')\n"
        "except OSError as e:\n    print(json.dumps([e.errno, e.strerror, e.filename, type(e).__name__]))\n"
    )
    real = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True,
                                     text=True, check=True).stdout)  # fmt: skip
    made = OSError(errno.ENOENT, os.strerror(errno.ENOENT), "/definitely/not/here")
    assert real == [made.errno, made.strerror, made.filename, type(made).__name__]


def test_exploration_sees_every_file_operation(guard_pytester: pytest.Pytester) -> None:
    """A start-up that lists, writes, renames and removes in the raced repo's folder: each is an
    access point of its own, explored in turn."""
    guard_pytester.makepyfile(
        """
import json, os


def test_explore(hub_cache, hub_race):
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    folder = repo.pointer("config.json").parent

    def startup():
        os.listdir(folder)
        (folder / "x.tmp").write_text("1")
        os.replace(folder / "x.tmp", folder / "x.json")
        os.remove(folder / "x.json")
        try:
            with open(repo.pointer("config.json")) as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None

    exploration = hub_race.explore("pointer_swap", repo, "config.json", startup)
    ops = [outcome.point.op for outcome in exploration.points]
    assert ops[:5] == ["os.listdir", "open", "os.rename", "os.remove", "open"], ops
"""
    )
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


def test_the_operations_are_one_list_on_both_sides() -> None:
    """The child reports, the controller accepts and users name the same file operations."""
    from pytest_startup_guard.runtime.events import (
        FILE_OPS,
    )
    from pytest_startup_guard.runtime.operations import OPERATIONS
    from pytest_startup_guard.runtime.protocol import ACCESS_EVENTS

    assert set(FILE_OPS) == ACCESS_EVENTS == set(OPERATIONS.values())
