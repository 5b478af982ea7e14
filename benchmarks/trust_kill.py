"""``kill -9`` rounds: pytest killed while what its test started has detached itself; what is left.

One round (``kill_9_round``): a pytest run (``-p startup_guard``, in a session of its own, its
temp dir a fresh folder) runs a test that launches two fleet members that detach helpers and a
start-method check whose start-up does the same and then hangs:

- a Python server that daemonizes a helper (a new session and a double fork, as Ray's
  ``ray start`` leaves its daemons),
- a shell (not Python) that puts ``sleep`` in the background twice: once in a session of its
  own, once orphaned in the member's own group.

Once every helper runs and the test has told their pids, pytest gets SIGKILL. The round then
looks, for up to ``within`` seconds, until no process of the run is left (neither a pid the test
told, nor the reaper, nor any process whose environment carries the run's marker) and the temp
dir is empty (plan folders: ``sg-*``); it returns when that was, and what was left.

``kill_9_rounds(n)`` is the benchmark's figure ("kill -9 rounds, at least 5, with detached
helpers: what was left", target 0 processes and 0 folders); ``tests/test_reaper_folders.py``
asserts one round. ``write_detachers(folder)`` puts the detaching members next to a test file
(``detachers.py``), for ``tests/test_detached.py`` too.

Run: ``python benchmarks/trust_kill.py [--rounds N]``. Linux (``/proc``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_startup_guard.runtime.process_identity import proc_stat

WITHIN_SECONDS = 15.0  # the bound: after kill -9, everything of the run is gone by then

# Written next to the inner test file as ``detachers.py``: the members and how to launch them.
DETACHERS = r'''"""Members that detach helpers from their tree (written by benchmarks/trust_kill.py)."""

import os
import sys
import threading
import time
from pathlib import Path

from pytest_startup_guard import ready

# argv: folder, name, then "hang" (sleep on after "up") or "exit" (exit 0 after "up").
DAEMONIZING = """
import os, sys, time
folder, name, then = sys.argv[1], sys.argv[2], sys.argv[3]

def record(kind):
    path = os.path.join(folder, name + "-" + kind + ".pid")
    with open(path + ".part", "w") as out:
        out.write(str(os.getpid()))
    os.replace(path + ".part", path)

def detach_output():
    # What a daemon does: let go of the output its starter reads (a pipe would stay open).
    null = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):
        os.dup2(null, descriptor)

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        detach_output()
        record("daemon")
        time.sleep(300)
    os._exit(0)
os.wait()
while not os.path.exists(os.path.join(folder, name + "-daemon.pid")):
    time.sleep(0.01)
record("leader")
print("up", flush=True)
if then == "hang":
    time.sleep(300)
"""

# $1 folder, $2 name: one sleep in a session of its own, one orphaned in the member's group.
SHELL = """
( setsid sh -c 'echo $$ > "$1.part" && mv "$1.part" "$1" && exec sleep 301' sh "$1/$2-setsid.pid" & )
( sh -c 'echo $$ > "$1.part" && mv "$1.part" "$1" && exec sleep 302' sh "$1/$2-orphan.pid" & )
while [ ! -e "$1/$2-setsid.pid" ] || [ ! -e "$1/$2-orphan.pid" ]; do sleep 0.02; done
echo $$ > "$1/$2-leader.pid"
echo up
exec sleep 303
"""

# At import: daemonize a helper, and go on once it runs (for the import-race probe).
MODULE = """
import os, time
_read, _write = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        _null = os.open(os.devnull, os.O_RDWR)
        for _descriptor in (0, 1, 2):
            os.dup2(_null, _descriptor)  # let go of the probe's pipes, as a daemon does
        _path = os.path.join(os.environ["SG_DAEMONS"], str(os.getpid()) + "-daemon.pid")
        with open(_path, "w") as _out:
            _out.write(str(os.getpid()))
        os.write(_write, b"x")
        time.sleep(300)
    os._exit(0)
os.wait()
os.read(_read, 1)
"""


def read_pids(folder, names, within=60.0):
    """``{name: pid}`` once every ``<name>.pid`` is in ``folder``."""
    deadline = time.monotonic() + within
    paths = {name: Path(folder) / f"{name}.pid" for name in names}
    while not all(path.exists() for path in paths.values()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never written: {[str(p) for p in paths.values()]}")
        time.sleep(0.02)
    return {name: int(path.read_text()) for name, path in paths.items()}


def launch_detachers(server_fleet, folder):
    """A Python member that daemonizes a helper and a shell member that backgrounds two sleeps;
    ``(fleets, {name: pid})`` once every helper runs."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "detaching.sh"
    script.write_text(SHELL)
    python = server_fleet.launch(
        [sys.executable, "-c", DAEMONIZING, str(folder), "py", "hang"], ready=ready.log("up")
    )
    shell = server_fleet.launch(["sh", str(script), str(folder), "sh"], ready=ready.log("up"))
    python.assert_all_ready()
    shell.assert_all_ready()
    names = ["py-leader", "py-daemon", "sh-leader", "sh-setsid", "sh-orphan"]
    return [python, shell], read_pids(folder, names)


def start_hanging_check(start_methods, folder):
    """A start-method check, in a thread, whose start-up daemonizes a helper and hangs;
    ``{name: pid}`` once the helper runs."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    startup = [sys.executable, "-c", DAEMONIZING, str(folder), "start", "hang"]
    threading.Thread(
        target=start_methods.check,
        args=(startup,),
        kwargs={"methods": ["spawn"], "timeout": 300},
        daemon=True,
    ).start()
    return read_pids(folder, ["start-leader", "start-daemon"])
'''

INNER = r"""
import json, os, time
from pathlib import Path

from detachers import launch_detachers, start_hanging_check


def tell(child_runtime, pids, marker=None):
    out = Path(os.environ["SG_TOLD"])
    part = out.with_suffix(".part")
    state = {"folder": str(child_runtime.folder), "pids": pids, "marker": marker}
    part.write_text(json.dumps(state))
    os.replace(part, out)


def test_detached(child_runtime, server_fleet, start_methods, tmp_path):
    fleets, pids = launch_detachers(server_fleet, tmp_path / "fleet")
    pids.update(start_hanging_check(start_methods, tmp_path / "check"))
    tell(child_runtime, pids, fleets[0].marker)
    time.sleep(300)


def test_runtime_only(child_runtime):
    tell(child_runtime, {})
    time.sleep(300)
"""


@dataclass
class Round:
    """One kill -9 round: what ran, and what was left ``within`` seconds after the kill."""

    which: str
    helpers: dict[str, int]  # every pid the test told (members and their detached helpers)
    reaper: int | None  # the reaper process of the killed pytest
    marker: str | None  # the fleet's STARTUP_GUARD_RUN value
    plan_folder: str
    folders_before: list[str]  # the temp dir's entries just before the kill
    seconds: float | None  # from the kill until nothing was left (None: something was)
    processes_left: list[str] = field(default_factory=list)  # "name pid" of each survivor
    folders_left: list[str] = field(default_factory=list)  # what the temp dir still holds
    output: str = ""  # the killed pytest's output


def _user_env() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("STARTUP_GUARD_", "PYTEST_"))
    }


def _start(pid: int) -> int | None:
    """The start time of ``pid`` (None if gone, or a zombie: it runs no more)."""
    facts = proc_stat(pid)
    return facts.started if facts is not None and facts.runs else None


def _carriers(run_id: str) -> dict[int, int]:
    """``{pid: start}`` of every running process whose environment carries the run's marker."""
    from pytest_startup_guard.runtime.run_marker import carriers

    return {carrier.pid: carrier.started for carrier in carriers(run_id, whole_run=True)}


def _reaper_of(pytest_pid: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == pytest_pid and b"pytest_startup_guard.fleet.reaper" in cmdline:
            return int(entry.name)
    return None


def write_detachers(folder: Path) -> None:
    """``detachers.py`` next to a test file: the members that detach helpers."""
    (folder / "detachers.py").write_text(DETACHERS)


def kill_9_round(which: str = "detached", within: float = WITHIN_SECONDS) -> Round:
    """One round (see the module); ``which``: ``detached`` or ``runtime_only`` (no processes,
    only the plan folder)."""
    work = Path(tempfile.mkdtemp(prefix="sgk-", dir="/tmp"))  # short: a plan's socket path
    try:
        return _round(work, which, within)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _round(work: Path, which: str, within: float) -> Round:
    tests, temp = work / "tests", work / "tmp"
    tests.mkdir()
    temp.mkdir()
    write_detachers(tests)
    (tests / "test_inner.py").write_text(INNER)
    told = work / "told.json"
    env = {
        **_user_env(),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "TMPDIR": str(temp),
        "SG_TOLD": str(told),
    }
    command = [sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "no:cacheprovider"]
    command += [f"--basetemp={work / 'basetemp'}", "-k", which, "test_inner.py"]
    log = work / "pytest.log"
    with open(log, "wb") as output:
        pytest_process = subprocess.Popen(
            command, cwd=tests, env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not told.exists() and pytest_process.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError("the inner test never told its pids")
            time.sleep(0.05)
        if not told.exists():
            raise AssertionError(f"the inner pytest ended early:\n{log.read_text()}")
        state = json.loads(told.read_text())
        helpers: dict[str, int] = state["pids"]
        marker: str | None = state["marker"]
        reaper = _reaper_of(pytest_process.pid)
        watched = {**helpers, **({"reaper": reaper} if reaper is not None else {})}
        starts = {name: _start(pid) for name, pid in watched.items()}
        folders_before = sorted(path.name for path in temp.iterdir())
        pytest_process.send_signal(signal.SIGKILL)
        killed_t = time.monotonic()
        pytest_process.wait(timeout=30)
    finally:
        if pytest_process.poll() is None:
            pytest_process.kill()
            pytest_process.wait()

    run_id = marker.rsplit(":", 1)[0] if marker else None

    def left() -> tuple[list[str], list[str]]:
        processes = [
            f"{name} {watched[name]}"
            for name, started in starts.items()
            if started is not None and _start(watched[name]) == started
        ]
        if run_id is not None:
            known = set(watched.values())
            processes += [f"carrier {pid}" for pid in _carriers(run_id) if pid not in known]
        return processes, sorted(path.name for path in temp.iterdir())

    processes, folders = left()
    while (processes or folders) and time.monotonic() - killed_t < within:
        time.sleep(0.05)
        processes, folders = left()
    seconds = None if processes or folders else time.monotonic() - killed_t
    _end_what_is_left(watched, starts, run_id)
    return Round(
        which=which,
        helpers=helpers,
        reaper=reaper,
        marker=marker,
        plan_folder=state["folder"],
        folders_before=folders_before,
        seconds=seconds,
        processes_left=processes,
        folders_left=folders,
        output=log.read_text(errors="replace"),
    )


def _end_what_is_left(
    watched: dict[str, int], starts: dict[str, int | None], run_id: str | None
) -> None:
    """A round that failed must not leave its processes to the next one."""
    survivors = {pid: starts[name] for name, pid in watched.items()}
    if run_id is not None:
        survivors.update(_carriers(run_id))
    for pid, started in survivors.items():
        if started is not None and _start(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def kill_9_rounds(rounds: int = 5, within: float = WITHIN_SECONDS) -> list[Round]:
    """``rounds`` rounds with detached helpers, one after the other."""
    return [kill_9_round("detached", within) for _ in range(rounds)]


def summary(results: list[Round]) -> dict[str, object]:
    """The figures: rounds, processes and folders left in all, the slowest clean-up."""
    times = [result.seconds for result in results if result.seconds is not None]
    return {
        "rounds": len(results),
        "helpers_per_round": max((len(result.helpers) for result in results), default=0),
        "processes_left": sum(len(result.processes_left) for result in results),
        "folders_left": sum(len(result.folders_left) for result in results),
        "slowest_seconds": max(times) if len(times) == len(results) else None,
    }


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    print(json.dumps(summary(kill_9_rounds(arguments.rounds)), indent=2))
