"""Real servers that start their own workers, run as users run them: each worker is judged.

The three topologies of ``examples/servers/``, each with 2 workers on one shared socket (more prove nothing more, and each
costs a transformers import):

- ``launcher``: ``launcher_server.py --api-server-count 2``, a vLLM-style launcher that spawns
  its API servers (multiprocessing's spawn) and ends them all, exit code 1, when one dies;
- ``uvicorn``: ``uvicorn asgi_app:app --workers 2`` (spawn); a worker whose lifespan start-up
  fails exits 3 and the supervisor stops, with exit code **0**;
- ``gunicorn``: ``gunicorn -w 2 wsgi_app:app`` (fork, no ``--preload``); a worker whose import
  fails exits 3 and the arbiter halts (exit code 3, or 1 when a second worker's failure is
  reaped while it halts).

For each: a clean start passes; naive workers under a deterministic ``pointer_swap`` (at each
worker's third access of the repo: the JSON open, so the error names config.json) fail, naming
a dead worker's pid and the OSError; retrying workers survive the same case; and under a chaos
refresher a run fails exactly when a worker really died (read from the supervisor's own log).

Uses ``server_fleet.launch(..., workers=N)`` and the worker verdicts (docs/workers.md).

Each start costs seconds (2 processes importing transformers; 3-5 s on a 2-core runner, up to
15 s on a loaded one), so each case is its own test: ``-n 2`` spreads them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "examples" / "servers"
BIN = Path(sys.executable).parent
WORKERS = 2

# The command of each topology, as a user writes it; {port} is the fleet's.
COMMANDS: dict[str, list[str]] = {
    "launcher": [
        sys.executable,
        str(SERVERS / "launcher_server.py"),
        "--port",
        "{port}",
        "--repo",
        "acme/tiny",
        "--api-server-count",
        str(WORKERS),
    ],
    "uvicorn": [
        str(BIN / "uvicorn"),
        "asgi_app:app",
        "--app-dir",
        str(SERVERS),
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--workers",
        str(WORKERS),
    ],
    # --no-control-socket: gunicorn >= 25.1 otherwise binds $HOME/.gunicorn/gunicorn.ctl, one
    # path for every gunicorn of the run (each unlinks and takes over the others').
    "gunicorn": [
        str(BIN / "gunicorn"),
        "-w",
        str(WORKERS),
        "-k",
        "sync",
        "--no-control-socket",
        "--chdir",
        str(SERVERS),
        "-b",
        "127.0.0.1:{port}",
        "wsgi_app:app",
    ],
}
# The launcher retries with a flag; the ASGI and WSGI apps read RETRY=1 from the environment.
RETRY_FLAG = {"launcher": ["--retry"], "uvicorn": [], "gunicorn": []}

# What each supervisor logs when one of its workers dies during start-up: the pid it names.
WORKER_DIED = {
    "launcher": re.compile(r"ApiServer_\d+ \(pid (\d+)\) exited with code [1-9]"),
    "uvicorn": re.compile(r"Child process \[(\d+)\] failed to start"),
    "gunicorn": re.compile(r"Worker \(pid:(\d+)\) exited with code [1-9]"),
}

COMMON = """
import sys
from pathlib import Path
import pytest
from pytest_startup_guard import chaos, on_access, ready

COMMAND = {command!r}
RETRY_FLAG = {retry_flag!r}
WORKERS = {workers!r}

def add_repo(hub_cache):
    return hub_cache.add_model("acme/tiny", {{"config.json": {{"model_type": "gpt2"}}}})

def launch(server_fleet, retry=False):
    return server_fleet.launch(
        COMMAND + (RETRY_FLAG if retry else []), count=1, workers=WORKERS,
        ready=ready.http("/health"),
        env={{"REPO_ID": "acme/tiny", "RETRY": "1" if retry else "0"}},
    )
"""

CLEAN = """
from common import *

def test_clean_start(hub_cache, server_fleet):
    add_repo(hub_cache)
    fleet = launch(server_fleet)
    fleet.assert_all_ready()
    server = fleet.servers[0]
    running = [worker for worker in server.workers if not worker.ended]
    assert len(running) >= WORKERS, server.report()
"""

# The third access of the repo is the JSON open: the error names config.json, in each worker.
RACE = """
from common import *

@pytest.mark.startup_races(transient=["pointer_swap"])
@pytest.mark.parametrize("retry", [{retry!r}], ids=["{policy}"])
def test_race(startup_case, hub_cache, server_fleet, retry):
    repo = add_repo(hub_cache)
    startup_case.apply(repo, "config.json", trigger=on_access(nth=3))
    startup_case.check(launch(server_fleet, retry))
"""

# Windows of ~20 ms every ~5 ms: a naive worker's reads of the config nearly always meet one.
CHAOS = """
from common import *

def test_chaos(hub_cache, hub_race, server_fleet):
    repo = add_repo(hub_cache)
    hub_race.arm("pointer_swap", repo, "config.json", trigger=chaos(gap=0.005, hold=0.02))
    launch(server_fleet).assert_all_ready()
"""


@pytest.fixture(params=sorted(COMMANDS))
def topology(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def topology_pytester(guard_pytester: pytest.Pytester, topology: str) -> pytest.Pytester:
    guard_pytester.makepyfile(
        common=COMMON.format(
            command=COMMANDS[topology], retry_flag=RETRY_FLAG[topology], workers=WORKERS
        )
    )
    guard_pytester.syspathinsert()
    return guard_pytester


def member_output(pytester: pytest.Pytester) -> str:
    """What the member and its workers printed, read from the fleet's own files."""
    logs = sorted(pytester.path.glob("**/startup-guard-fleet/*/server-*.log"))
    return "\n".join(path.read_text(errors="replace") for path in logs)


def test_a_clean_start_of_every_worker_passes(topology_pytester: pytest.Pytester) -> None:
    topology_pytester.makepyfile(CLEAN)
    result = topology_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)


def test_naive_workers_under_a_race_fail_naming_a_dead_worker(
    topology_pytester: pytest.Pytester, topology: str
) -> None:
    topology_pytester.makepyfile(RACE.format(retry=False, policy="naive"))
    result = topology_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    died = [int(pid) for pid in WORKER_DIED[topology].findall(member_output(topology_pytester))]
    assert died, f"no worker of {topology} died: the race missed them\n{output}"
    named = {int(pid) for pid in re.findall(r"worker pid (\d+)\b[^\n]*exited with code", output)}
    assert named & set(died), f"no dead worker ({died}) is named\n{output}"
    assert re.search(r"(OSError|FileNotFoundError)\b[^\n]*config\.json", output), output


def test_retrying_workers_survive_the_same_race(
    topology_pytester: pytest.Pytester,
) -> None:
    topology_pytester.makepyfile(RACE.format(retry=True, policy="retry"))
    result = topology_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)


def test_under_chaos_a_run_fails_exactly_when_a_worker_died(
    topology_pytester: pytest.Pytester, topology: str
) -> None:
    topology_pytester.makepyfile(CHAOS)
    result = topology_pytester.runpytest_subprocess("-p", "startup_guard")
    output = result.stdout.str()
    died = [int(pid) for pid in WORKER_DIED[topology].findall(member_output(topology_pytester))]
    if died:  # what the supervisor saw, not what the plugin says
        result.assert_outcomes(failed=1)
        named = {int(pid) for pid in re.findall(r"worker pid (\d+)\b", output)}
        assert named & set(died), f"no dead worker ({died}) is named\n{output}"
    else:
        result.assert_outcomes(passed=1)
