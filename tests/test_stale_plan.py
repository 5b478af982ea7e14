"""A stale plan does nothing: a process that inherits ``STARTUP_GUARD_PLAN`` but whose
controller is gone, refuses, does not answer, or whose plan folder is not a private folder of
this user runs exactly as without a plan, after at most one line on stderr."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from user_env import user_env

from pytest_startup_guard import RuntimeController
from pytest_startup_guard.runtime.protocol import PLAN_ENV, decode_plan, encode_plan

# What a process under a plan would have changed: printed as one JSON line.
STATE = """
import faulthandler, json, os, signal, sys
import multiprocessing.process
from pytest_startup_guard.runtime import child
print(json.dumps({
    "sys.exit": type(sys.exit).__name__,
    "os._exit": type(os._exit).__name__,
    "os.waitpid": type(os.waitpid).__name__,
    "stack dump handler": faulthandler.unregister(signal.SIGURG),
    "multiprocessing wrapped": hasattr(multiprocessing.process.BaseProcess._bootstrap, "startup_guard"),
    "installed": child.identity()["installed"],
    "active": child.identity()["active"],
}))
"""


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def plain_env() -> dict[str, str]:
    return user_env()  # no STARTUP_GUARD_* at all


def with_plan(plan: dict[str, object]) -> dict[str, str]:
    return {**plain_env(), PLAN_ENV: encode_plan(plan)}


class Place:
    """A folder like a plan's (short: a Unix socket's path is short; private), and the
    sockets a case keeps listening there until the test ends."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="stale-plan-", dir="/tmp"))
        self.sockets: list[socket.socket] = []

    def listening(self, path: Path) -> None:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
        listener.listen()  # accepts into its backlog, never answers a hello
        self.sockets.append(listener)


@pytest.fixture
def place() -> Iterator[Place]:
    made = Place()
    try:
        yield made
    finally:
        for listener in made.sockets:
            listener.close()
        shutil.rmtree(made.folder, ignore_errors=True)


def gone(place: Place) -> dict[str, object]:
    with RuntimeController() as controller:
        plan = decode_plan(controller.env[PLAN_ENV])
    assert plan is not None
    return plan  # its folder went with the controller


def refusing(place: Place) -> dict[str, object]:
    folder = place.folder
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(folder / "ctl.sock"))  # bound, never listening: a connect is refused
    listener.close()
    return {"socket": str(folder / "ctl.sock"), "dumps": str(folder / "dumps")}


def open_to_others(place: Place) -> dict[str, object]:
    plan = refusing(place)
    place.folder.chmod(0o755)
    return plan


def a_symlink(place: Place) -> dict[str, object]:
    real = place.folder / "real"
    real.mkdir(mode=0o700)
    link = place.folder / "link"
    link.symlink_to(real)
    place.listening(real / "ctl.sock")  # something listens behind the link
    return {"socket": str(link / "ctl.sock"), "dumps": str(link / "dumps")}


def silent(place: Place) -> dict[str, object]:
    place.listening(place.folder / "ctl.sock")
    # The hello waits barrier_timeout + 5 s for an answer.
    return {"socket": str(place.folder / "ctl.sock"), "dumps": None, "barrier_timeout": 0.1}


def another_users(place: Place) -> dict[str, object]:
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    plan = refusing(place)
    os.chown(place.folder, 65534, 65534)  # nobody
    return plan


def with_field(key: str, value: object) -> Callable[[Place], dict[str, object]]:
    """A plan that would reach a listening socket, but whose ``key`` is ``value``."""

    def plan(place: Place) -> dict[str, object]:
        place.listening(place.folder / "ctl.sock")
        return {"socket": str(place.folder / "ctl.sock"), "dumps": None, key: value}

    return plan


STALE: dict[str, Callable[[Place], dict[str, object]]] = {
    "socket gone": gone,
    "time-out a text": with_field("reply_timeout", "soon"),
    "time-out nan": with_field("barrier_timeout", float("nan")),
    "time-out inf": with_field("reply_timeout", float("inf")),
    "time-out a list": with_field("barrier_timeout", [1]),
    "another protocol": with_field("v", 99),
    "socket refuses": refusing,
    "controller silent": silent,
    "folder open to others": open_to_others,
    "folder is a symlink": a_symlink,
    "folder of another user": another_users,
}
REASONS = {
    "socket gone": "is gone (No such file or directory)",
    "time-out a text": "its reply_timeout 'soon' is not a number of seconds in (0, 86400]",
    "time-out nan": "its barrier_timeout nan is not a number of seconds",
    "time-out inf": "its reply_timeout inf is not a number of seconds",
    "time-out a list": "its barrier_timeout [1] is not a number of seconds",
    "another protocol": "its protocol version 99 is not this runtime's",
    "socket refuses": "nothing answers at",
    "controller silent": "did not answer",
    "folder open to others": "is open to other users (mode 0o755",
    "folder is a symlink": "is not a folder (a symlink",
    "folder of another user": "belongs to uid 65534",
}


@pytest.mark.parametrize("case", STALE)
def test_a_stale_plan_changes_nothing_and_says_so_in_one_line(case: str, place: Place) -> None:
    plan = STALE[case](place)
    without = run_python(STATE, plain_env())
    stale = run_python(STATE, with_plan(plan))
    assert (stale.returncode, stale.stdout) == (without.returncode, without.stdout), stale.stderr
    assert json.loads(stale.stdout) == {
        "sys.exit": "builtin_function_or_method",
        "os._exit": "builtin_function_or_method",
        "os.waitpid": "builtin_function_or_method",
        "stack dump handler": False,
        "multiprocessing wrapped": False,
        "installed": [],
        "active": False,
    }
    (line,) = stale.stderr.splitlines()
    assert line.startswith(f"startup-guard: ignoring {PLAN_ENV}"), line
    assert REASONS[case] in line, line
    if plan.get("dumps"):
        assert not os.path.exists(str(plan["dumps"])), "a stale plan's folder was written to"


def test_a_live_plan_installs_what_a_stale_one_does_not() -> None:
    """The other side of the check above: the same probe sees everything under a live plan."""
    with RuntimeController() as controller:
        live = run_python(STATE, {**plain_env(), **controller.env})
    assert live.returncode == 0 and not live.stderr, live.stderr
    state = json.loads(live.stdout)
    assert state["installed"] == ["audit hook", "exit watch", "stack dump"]
    assert (state["sys.exit"], state["stack dump handler"], state["active"]) == (
        "function",
        True,
        True,
    )


FORKS_LATER = """
import faulthandler, json, os, signal, sys
from pytest_startup_guard.runtime import child
print(json.dumps(child.identity()["installed"]), flush=True)
sys.stdin.readline()  # the test closes the controller meanwhile
open(sys.argv[1]).read()  # a watched access: no controller to wait for
pid = os.fork()
if pid == 0:
    state = {
        "sys.exit": type(sys.exit).__name__,
        "os._exit": type(os._exit).__name__,
        "stack dump handler": faulthandler.unregister(signal.SIGURG),
        "installed": child.identity()["installed"],
    }
    print(json.dumps(state), flush=True)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_fork_after_the_controller_went_away_stays_quiet(tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    (watched / "file").write_text("x")
    with RuntimeController() as controller:
        controller.watch(watched)
        process = subprocess.Popen(
            [sys.executable, "-c", FORKS_LATER, str(watched / "file")],
            env={**plain_env(), **controller.env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        before = json.loads(process.stdout.readline())
        assert before == ["audit hook", "exit watch", "stack dump"]
    stdout, stderr = process.communicate("go\n", timeout=60)
    assert process.returncode == 0, stderr
    assert stderr == ""
    # The audit hook cannot be removed: it stays, reporting to no one; the rest is undone.
    assert json.loads(stdout) == {
        "sys.exit": "builtin_function_or_method",
        "os._exit": "builtin_function_or_method",
        "stack dump handler": False,
        "installed": ["audit hook"],
    }
