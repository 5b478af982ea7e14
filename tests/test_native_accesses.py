"""File accesses made in native code (``launch(native_accesses=True)``: the LD_PRELOAD interposer
of ``runtime/native``), run as users run them: pytester writes the test, a real C program (built
here with the system's C compiler) or a real Python member makes the calls."""

from __future__ import annotations

import os
import re
import shutil
import sys

import psutil
import pytest

pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CC") or "cc") is None or not sys.platform.startswith("linux"),
    reason="needs a C compiler and Linux's LD_PRELOAD",
)

# A native member: makes each call named in its argv on FOLDER and writes one line per call to
# OUT ("<call> ok" or "<call> errno <N> <strerror>"), then prints "done" and serves (sleeps).
CALLER = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
static FILE *out;
static char folder[2048];
static const char *in(const char *name) {
  static char paths[8][4096]; static int next;
  char *path = paths[next++ % 8];
  snprintf(path, 4096, "%s/%s", folder, name);
  return path;
}
static void record(const char *call, int failed) {
  if (failed) fprintf(out, "%s errno %d %s\n", call, errno, strerror(errno));
  else fprintf(out, "%s ok\n", call);
  fflush(out);
}
static int locked(int how) {
  int fd = open(in("the.lock"), O_RDWR | O_CREAT, 0644);
  if (fd < 0) return -1;
  int result = how ? lockf(fd, F_LOCK, 0) : flock(fd, LOCK_EX);
  close(fd);
  return result;
}
int main(int argc, char **argv) {
  out = fopen(argv[1], "a");
  snprintf(folder, sizeof(folder), "%s", argv[2]);
  for (int i = 3; i < argc; i++) {
    const char *call = argv[i];
    int failed = 0;
    if (!strcmp(call, "fopen")) { FILE *f = fopen(in("data.json"), "r"); failed = !f; if (f) fclose(f); }
    else if (!strcmp(call, "open")) { int fd = open(in("data.json"), O_RDONLY); failed = fd < 0; if (fd >= 0) close(fd); }
    else if (!strcmp(call, "mkdir")) failed = mkdir(in("made"), 0755) < 0;
    else if (!strcmp(call, "rename")) failed = rename(in("data.json"), in("moved.json")) < 0;
    else if (!strcmp(call, "rmdir")) failed = rmdir(in("empty")) < 0;
    else if (!strcmp(call, "unlink")) failed = unlink(in("gone.txt")) < 0;
    else if (!strcmp(call, "symlink")) failed = symlink("moved.json", in("link.json")) < 0;
    else if (!strcmp(call, "link")) failed = link(in("moved.json"), in("hard.json")) < 0;
    else if (!strcmp(call, "truncate")) failed = truncate(in("hard.json"), 0) < 0;
    else if (!strcmp(call, "chmod")) failed = chmod(in("hard.json"), 0600) < 0;
    else if (!strcmp(call, "flock")) failed = locked(0) < 0;
    else if (!strcmp(call, "lockf")) failed = locked(1) < 0;
    else if (!strcmp(call, "relative")) { failed = chdir(folder) < 0 || open("moved.json", O_RDONLY) < 0; }
    else if (!strcmp(call, "outside")) { FILE *f = fopen(argv[1], "r"); failed = !f; if (f) fclose(f); }
    else if (!strcmp(call, "detach")) {
      pid_t child = fork();
      if (child == 0) { setsid(); fprintf(out, "detached %d\n", (int)getpid()); fflush(out); sleep(300); _exit(0); }
      failed = child < 0;
    }
    record(call, failed);
  }
  printf("done\n");
  fflush(stdout);
  sleep(300);
  return 0;
}
"""

PRELUDE = f"""
import os, subprocess, sys
from pathlib import Path
import pytest
from pytest_startup_guard import StartupGuardError, fs_error, on_access, ready

CALLER = {CALLER!r}


def prepare(folder):
    folder.mkdir(exist_ok=True)
    (folder / "data.json").write_text("{{}}")
    (folder / "empty").mkdir(exist_ok=True)
    (folder / "gone.txt").write_text("x")


def caller(tmp_path, folder, *calls):
    source = tmp_path / "caller.c"
    source.write_text(CALLER)
    program = tmp_path / "caller"
    subprocess.run([os.environ.get("CC") or "cc", "-o", str(program), str(source)], check=True)
    out = tmp_path / "out.txt"
    return [str(program), str(out), str(folder), *calls], out


def results(out):
    return [line.split(" ", 1) for line in out.read_text().splitlines()]


def seen(runtime, pid, folder):
    return [
        (event.op, os.path.relpath(event.path, folder),
         event.other if not (event.other or "").startswith("/")
         else os.path.relpath(event.other, folder))
        for event in runtime.accesses_of(pid)
    ]
"""


def run(guard_pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    guard_pytester.makepyfile(PRELUDE + body)
    return guard_pytester.runpytest_subprocess("-p", "startup_guard", *args)


def test_a_native_program_reports_each_file_call_with_its_op_and_paths(
    guard_pytester: pytest.Pytester,
) -> None:
    """Every wrapped call of a C program under a watched folder is an access, with the op named
    as Python's audit event and absolute paths (relative ones resolved from the working
    folder); a call outside every watched folder is not; the process is a native worker."""
    result = run(
        guard_pytester,
        """
CALLS = ["fopen", "open", "mkdir", "rename", "rmdir", "unlink", "symlink", "link", "truncate",
         "chmod", "flock", "lockf", "relative", "outside"]


def test_calls(shared_dir, tmp_path, server_fleet, child_runtime):
    folder = shared_dir / "cache"
    prepare(folder)
    child_runtime.watch(folder)
    command, out = caller(tmp_path, folder, *CALLS)
    fleet = server_fleet.launch(command, ready=ready.log("done"), native_accesses=True)
    fleet.assert_all_ready()
    assert [status for _, status in results(out)] == ["ok"] * len(CALLS)
    pid = fleet.servers[0].pid
    assert seen(child_runtime, pid, folder) == [
        ("open", "data.json", None),
        ("open", "data.json", None),
        ("os.mkdir", "made", None),
        ("os.rename", "data.json", "moved.json"),
        ("os.rmdir", "empty", None),
        ("os.remove", "gone.txt", None),
        ("os.symlink", "link.json", "moved.json"),
        ("os.link", "hard.json", "moved.json"),
        ("os.truncate", "hard.json", None),
        ("os.chmod", "hard.json", None),
        ("open", "the.lock", None),
        ("fcntl.flock", "the.lock", None),
        ("open", "the.lock", None),
        ("fcntl.lockf", "the.lock", None),
        ("open", "moved.json", None),
    ]
    record = child_runtime.processes[pid]
    assert record.native and record.member == fleet.servers[0].member and not record.held
""",
    )
    result.assert_outcomes(passed=1)


def test_a_trigger_on_a_native_access_opens_the_window_before_the_call(
    guard_pytester: pytest.Pytester,
) -> None:
    """``file_replace`` with ``on_access()``: the window opens right before the C program's
    open, which finds no file (ENOENT), and the hit names the native process and its open."""
    result = run(
        guard_pytester,
        """
def test_trigger(shared_dir, tmp_path, server_fleet, hub_race):
    folder = shared_dir / "cache"
    prepare(folder)
    race = hub_race.arm_path("file_replace", folder / "data.json", trigger=on_access())
    command, out = caller(tmp_path, folder, "open", "fopen")
    fleet = server_fleet.launch(command, count=2, ready=ready.log("done"),
                                native_accesses=True)
    fleet.assert_all_ready()
    assert results(out)[0] == ["open", "errno 2 No such file or directory"]
    assert {hit.pid for hit in race.hits} == {server.pid for server in fleet.servers}
    assert {(hit.op, Path(hit.path).name) for hit in race.hits} == {("open", "data.json")}
    assert len(race.windows) >= 1
""",
    )
    result.assert_outcomes(passed=1)


def test_fs_error_fails_a_native_call_with_the_errno(guard_pytester: pytest.Pytester) -> None:
    """``fs_error`` answers a native call as it answers Python's: the libc call returns -1 with
    that errno (its strerror is the system's), and the fault counts as met."""
    result = run(
        guard_pytester,
        """
def test_errors(shared_dir, tmp_path, server_fleet):
    folder = shared_dir / "cache"
    prepare(folder)
    command, out = caller(tmp_path, folder, "fopen", "rename", "rmdir", "flock")
    faults = [
        fs_error("ENOSPC", folder / "data.json", op="open"),
        fs_error("ESTALE", folder, op="rename"),
        fs_error("EBUSY", folder / "empty", op="rmdir"),
        fs_error("ENOSYS", folder / "the.lock", op="flock"),
    ]
    fleet = server_fleet.launch(command, ready=ready.log("done"), faults=faults,
                                native_accesses=True)
    fleet.assert_all_ready()
    assert results(out) == [
        ["fopen", f"errno 28 {os.strerror(28)}"],
        ["rename", f"errno 116 {os.strerror(116)}"],
        ["rmdir", f"errno 16 {os.strerror(16)}"],
        ["flock", f"errno 38 {os.strerror(38)}"],
    ]
""",
    )
    result.assert_outcomes(passed=1)


def test_a_python_members_accesses_are_reported_once(guard_pytester: pytest.Pytester) -> None:
    """A Python member under the interposer: what its audit hook reports is not reported again
    by the libc call that follows; what its native code does (libc's open through ctypes) is
    reported, once; the process keeps one record, its Python one."""
    result = run(
        guard_pytester,
        """
SCRIPT = '''
import ctypes, fcntl, os, sys, time
folder = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
for _ in range(2):
    open(os.path.join(folder, "data.json")).close()
os.mkdir(os.path.join(folder, "made"))
os.replace(os.path.join(folder, "data.json"), os.path.join(folder, "moved.json"))
os.remove(os.path.join(folder, "gone.txt"))
with open(os.path.join(folder, "the.lock"), "w") as handle:
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
descriptor = libc.open(os.path.join(folder, "moved.json").encode(), os.O_RDONLY)
assert descriptor >= 0
print("done", flush=True)
time.sleep(300)
'''


def test_once(shared_dir, tmp_path, server_fleet, child_runtime):
    folder = shared_dir / "cache"
    prepare(folder)
    child_runtime.watch(folder)
    script = tmp_path / "member.py"
    script.write_text(SCRIPT)
    fleet = server_fleet.launch([sys.executable, str(script), str(folder)],
                                ready=ready.log("done"), native_accesses=True)
    fleet.assert_all_ready()
    pid = fleet.servers[0].pid
    assert seen(child_runtime, pid, folder) == [
        ("open", "data.json", None),
        ("open", "data.json", None),
        ("os.mkdir", "made", None),
        ("os.rename", "data.json", "moved.json"),
        ("os.remove", "gone.txt", None),
        ("open", "the.lock", None),
        ("fcntl.flock", "the.lock", None),
        ("open", "moved.json", None),
    ]
    assert [record.native for record in child_runtime.history if record.pid == pid] == [False]
""",
    )
    result.assert_outcomes(passed=1)


def test_without_a_compiler_the_launch_says_what_is_missing(
    guard_pytester: pytest.Pytester,
) -> None:
    result = run(
        guard_pytester,
        """
def test_cc_nowhere(tmp_path, server_fleet):
    with pytest.raises(StartupGuardError) as error:
        server_fleet.launch([sys.executable, "-c", "print('done')"], ready=ready.log("done"),
                            env={"CC": "/nowhere/cc"}, native_accesses=True)
    print("ERROR1", error.value)


def test_no_cc_on_path(tmp_path, server_fleet):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(StartupGuardError) as error:
        server_fleet.launch([sys.executable, "-c", "print('done')"], ready=ready.log("done"),
                            env={"CC": "", "PATH": str(empty)}, native_accesses=True)
    print("ERROR2", error.value)
""",
        "-s",
    )
    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    first = re.search(r"ERROR1 (.*)$", text, re.MULTILINE)
    second = re.search(r"ERROR2 (.*)$", text, re.MULTILINE)
    assert first and second, text
    for found in (first.group(1), second.group(1)):
        assert "server_fleet.launch(native_accesses=True) needs a C compiler" in found
    assert "CC='/nowhere/cc' is not a program" in first.group(1)
    assert "no 'cc' (and CC is not set)" in second.group(1) and "empty" in second.group(1)


def test_a_tree_under_the_interposer_leaves_nothing_running(
    guard_pytester: pytest.Pytester,
) -> None:
    """A native member that forks a detached child (its own session) and a Python member
    that starts a native program: every one of them ends with the test."""
    result = run(
        guard_pytester,
        """
def test_tree(shared_dir, tmp_path, server_fleet, child_runtime):
    folder = shared_dir / "cache"
    prepare(folder)
    child_runtime.watch(folder)
    command, out = caller(tmp_path, folder, "open", "detach")
    fleet = server_fleet.launch(command, ready=ready.log("done"), native_accesses=True)
    fleet.assert_all_ready()
    spawner = [sys.executable, "-c",
               "import subprocess, time; p = subprocess.Popen(['sleep', '300']);"
               f" open({str(tmp_path / 'pids.txt')!r}, 'w').write(str(p.pid));"
               " print('done', flush=True); time.sleep(300)"]
    python_fleet = server_fleet.launch(spawner, ready=ready.log("done"), native_accesses=True)
    python_fleet.assert_all_ready()
    detached = [line.split()[1] for line in out.read_text().splitlines()
                if line.startswith("detached")]
    pids = [fleet.servers[0].pid, python_fleet.servers[0].pid, *map(int, detached),
            int((tmp_path / "pids.txt").read_text())]
    print("PIDS", " ".join(map(str, pids)))
""",
        "-s",
    )
    result.assert_outcomes(passed=1)
    found = re.search(r"PIDS (.*)$", result.stdout.str(), re.MULTILINE)
    assert found, result.stdout.str()
    pids = [int(pid) for pid in found.group(1).split()]
    assert len(pids) == 4
    alive = [pid for pid in pids if psutil.pid_exists(pid) and _not_a_zombie(pid)]
    assert not alive, f"still running after the test: {alive}"


def _not_a_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
