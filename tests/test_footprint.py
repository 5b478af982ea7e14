"""The footprint stays proven: the bundled examples, run as a user runs them, write nothing
outside the run's own folders and reach nothing beyond loopback, in any of their processes.

The examples run with ``HOME``, the cache variables and ``TMPDIR`` pointing at empty folders of
this test. Every Python process of every example test reports its footprint through the child
runtime (``child_runtime.record_footprint()``, turned on by a small plugin loaded with ``-p``);
the pytest process that runs them records its own with an audit hook, through the same
``footprint_of``. The examples: a fleet of uvicorn supervisors with spawned workers (the naive
policy fails: its artifacts are written too) and servers under a raced kernel cache, a stale
build lock and two port faults.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from user_env import user_env

from pytest_startup_guard.runtime.footprint import FootprintEvent

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SELECTION = [
    "test_workers.py",
    "test_shared_faults.py",
    "-k",
    "test_uvicorn_workers or (kernel_cache and retry) or break or other_port",
]
# Enough to tell that the footprint was recorded at all: 2 uvicorn tests (a supervisor and 2
# workers each), 4 kernel-cache races, 1 stale lock and 1 port fault (2 servers each).
MIN_TESTS = 8
EMPTY_FOLDERS = (
    "HOME",
    "XDG_CACHE_HOME",
    "HF_HOME",
    "HF_HUB_CACHE",
    "TRANSFORMERS_CACHE",
    "TMPDIR",
)
LOOPBACK_HOSTS = {"127.0.0.1", "::1", "localhost"}
DEVICES = {"/dev/null"}  # written to, never changed (subprocess.DEVNULL opens it for writing)

RECORDER = '''
"""Loaded with ``-p footprint_recorder``: what every process of every test changed and reached."""

import atexit
import json
import os
import sys
import time

import pytest

from pytest_startup_guard.runtime.child import footprint_of
from pytest_startup_guard.runtime.protocol import FOOTPRINT_EVENTS

OUT = os.environ["FOOTPRINT_OUT"]
own = []  # the pytest process's own: (op, path, source)


def record_own(event, args):
    if event in FOOTPRINT_EVENTS:
        try:
            seen = footprint_of(event, args)
        except Exception as error:  # a footprint it cannot tell is a finding, not a crash
            seen = (f"<untold: {error!r}>", None)
        if seen is not None:
            own.append((event, *seen))


def write(entry):
    with open(OUT, "a") as out:
        out.write(json.dumps(entry) + "\\n")


@atexit.register
def write_own():  # after pytest wrote its reports and artifacts
    write({"pid": os.getpid(), "test_process": [list(item) for item in own]})


sys.addaudithook(record_own)


@pytest.fixture(autouse=True)
def footprint(request):
    """Before any process of the test starts; after the fleet's teardown ended them all."""
    if "child_runtime" not in request.fixturenames:
        yield
        return
    runtime = request.getfixturevalue("child_runtime")
    runtime.record_footprint()
    yield
    deadline = time.monotonic() + 15  # every process's last notices are in once it is gone
    while time.monotonic() < deadline:
        with runtime.lock:
            running = [r.pid for r in runtime.history if r.gone_t is None]
        if not running:
            break
        time.sleep(0.05)
    with runtime.lock:
        events = [[e.pid, e.op, e.path, e.source, e.t] for e in runtime.footprint]
        processes = {r.pid: r.argv for r in runtime.history}
    write({"test": request.node.nodeid, "plan": str(runtime.folder), "events": events,
           "processes": processes, "running": running})
'''


def _inside(path: str, folders: list[str]) -> bool:
    return path in DEVICES or any(
        path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders
    )


def _reaches_only_loopback(op: str, address: str, folders: list[str]) -> bool:
    if op == "socket.getaddrinfo":
        return address in LOOPBACK_HOSTS
    if address.startswith("/"):  # a Unix socket: the plan's, or one in the run's folders
        return _inside(address, folders)
    host = address.rsplit(":", 1)[0].removeprefix("[").removesuffix("]")
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def _violations(op: str, path: str, source: str | None, folders: list[str]) -> list[str]:
    event = FootprintEvent(pid=0, op=op, path=path, source=source, t=0.0)
    if event.network:
        return [] if _reaches_only_loopback(op, path, folders) else [f"{op} {path}"]
    return [f"{op} {changed}" for changed in event.changed if not _inside(changed, folders)]


def test_the_examples_write_only_in_their_folders_and_reach_only_loopback(tmp_path: Path) -> None:
    folders = {name: tmp_path / "env" / name.lower() for name in EMPTY_FOLDERS}
    for folder in folders.values():
        folder.mkdir(parents=True)
    basetemp, out = tmp_path / "basetemp", tmp_path / "out"
    out.mkdir()  # the plugin creates no folder for a report
    recorder = tmp_path / "recorder"
    recorder.mkdir()
    (recorder / "footprint_recorder.py").write_text(RECORDER)
    footprint = tmp_path / "footprint.jsonl"
    env = user_env()
    env.update({name: str(folder) for name, folder in folders.items()})
    env.update(
        FOOTPRINT_OUT=str(footprint),
        PYTHONPATH=os.pathsep.join(filter(None, [str(recorder), env.get("PYTHONPATH")])),
        PYTHONDONTWRITEBYTECODE="1",  # Python's own .pyc files are not the plugin's footprint
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    completed = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "footprint_recorder",
            "-p", "no:cacheprovider", "-q", f"--basetemp={basetemp}",
            f"--startup-guard-report={out / 'report.json'}",
            f"--startup-guard-html={out / 'report.html'}",
            f"--startup-guard-artifacts={out / 'artifacts'}",
            *SELECTION,
        ],
        cwd=EXAMPLES, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output  # the naive uvicorn workers fail, as they should
    entries: list[dict[str, Any]] = [
        json.loads(line) for line in footprint.read_text().splitlines()
    ]
    tests = [entry for entry in entries if "test" in entry]
    (pytest_process,) = [entry for entry in entries if "test_process" in entry]
    assert len(tests) >= MIN_TESTS, output
    # The run's own folders: pytest's temp folder, its temp dir, the report paths, the plans.
    allowed = [str(basetemp), str(out), str(folders["TMPDIR"]), *(t["plan"] for t in tests)]

    problems = []
    for entry in tests:
        assert not entry["running"], f"{entry['test']}: processes outlived the test"
        for pid, op, path, source, _t in entry["events"]:
            argv = " ".join(entry["processes"].get(str(pid), ["?"]))[:120]
            problems += [
                f"{entry['test']}: pid {pid} ({argv}): {what}"
                for what in _violations(op, path, source, allowed)
            ]
    problems += [
        f"the pytest process: {what}"
        for op, path, source in pytest_process["test_process"]
        for what in _violations(op, path, source, [*allowed, str(footprint)])  # the recorder's
    ]
    assert not problems, "\n".join(problems[:40])
    # Nothing at all in HOME or the caches, from Python or not; the run's temp dir is left empty.
    for name, folder in folders.items():
        assert not list(folder.iterdir()), f"{name}: {list(folder.iterdir())}"
    # The footprint is real: servers wrote their caches and outputs where they were told to, and
    # the test process probed them over loopback.
    ops = {op for entry in tests for _pid, op, *_ in entry["events"]}
    assert {"open", "os.rename"} <= ops, ops
    assert any(
        op == "socket.connect" and path.startswith("127.0.0.1:")
        for op, path, _ in pytest_process["test_process"]
    )
    assert (out / "report.json").is_file() and (out / "artifacts").is_dir()


@pytest.mark.parametrize(
    ("op", "path", "source", "allowed"),
    [
        ("open", "/home/user/.cache/x", None, False),
        ("open", "/run/folder/x", None, True),
        ("open", "/run/folder-other/x", None, False),
        ("os.rename", "/run/folder/x", "/elsewhere/x", False),
        ("os.symlink", "/run/folder/link", "/elsewhere/x", True),  # the link's text only
        ("socket.connect", "127.0.0.1:8000", None, True),
        ("socket.connect", "[::1]:8000", None, True),
        ("socket.connect", "10.0.0.1:443", None, False),
        ("socket.connect", "/run/folder/ctl.sock", None, True),
        ("socket.connect", "/var/run/docker.sock", None, False),
        ("socket.getaddrinfo", "huggingface.co", None, False),
    ],
)
def test_the_judge_of_a_footprint_can_fail(
    op: str, path: str, source: str | None, allowed: bool
) -> None:
    assert (not _violations(op, path, source, ["/run/folder"])) is allowed
