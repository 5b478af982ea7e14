"""Corrupt cases under a supervisor are judged on its workers; one failure is reported once.

Under ``uvicorn --workers 2``, ``gunicorn -w 2`` and the vLLM-style launcher the process the
plugin launched is a supervisor: the workers read the corrupt file, and the supervisor's own
exit code says little (uvicorn's is 0 after its workers failed their start-up). A corrupt case
passes when every worker that read the corrupt file failed closed in bounded time; a worker
that hides the corruption (comes up on a default) still fails it. A check that reports a dead
worker waits for its supervisor to react, and what follows from that failure (the supervisor
exiting) is no second, teardown error. The words name the file that was corrupted.

Each start of a real topology costs seconds (two workers importing transformers): each case is
its own test, so ``-n 2`` spreads them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_workers import COMMANDS, RETRY_FLAG, WORKERS  # the three topologies, as users run them

HERE = Path(__file__).resolve().parent

COMMON = """
import sys
import pytest
from pytest_startup_guard import ready

COMMAND = {command!r}
RETRY_FLAG = {retry_flag!r}
SWALLOW_FLAG = {swallow_flag!r}
WORKERS = {workers!r}

def add_repo(hub_cache):
    return hub_cache.add_model("acme/tiny", {{"config.json": {{"model_type": "gpt2"}}}})

def launch(server_fleet, policy):
    flags = RETRY_FLAG if policy == "retry" else SWALLOW_FLAG if policy == "swallow" else []
    env = {{"REPO_ID": "acme/tiny", "RETRY": str(int(policy == "retry")),
           "SWALLOW": str(int(policy == "swallow"))}}
    return server_fleet.launch(
        COMMAND + flags, count=1, workers=WORKERS, ready=ready.http("/health"), env=env,
    )
"""

SWALLOW_FLAG = {"launcher": ["--swallow"], "uvicorn": [], "gunicorn": []}

CORRUPT = """
from common import *

@pytest.mark.startup_races(corrupt=["empty"])
def test_corrupt(startup_case, hub_cache, server_fleet):
    repo = add_repo(hub_cache)
    startup_case.apply(repo, "config.json")
    startup_case.check(launch(server_fleet, {policy!r}))
"""


@pytest.fixture(params=sorted(COMMANDS))
def topology(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def topology_pytester(guard_pytester: pytest.Pytester, topology: str) -> pytest.Pytester:
    guard_pytester.makepyfile(
        common=COMMON.format(
            command=COMMANDS[topology],
            retry_flag=RETRY_FLAG[topology],
            swallow_flag=SWALLOW_FLAG[topology],
            workers=WORKERS,
        )
    )
    guard_pytester.syspathinsert()
    return guard_pytester


@pytest.mark.parametrize("policy", ["naive", "retry"])
def test_workers_that_fail_closed_pass_the_corrupt_case_whatever_the_supervisor_exits_with(
    topology_pytester: pytest.Pytester, policy: str
) -> None:
    topology_pytester.makepyfile(CORRUPT.format(policy=policy))
    result = topology_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)


def test_workers_that_hide_the_corruption_fail_the_corrupt_case(
    topology_pytester: pytest.Pytester,
) -> None:
    topology_pytester.makepyfile(CORRUPT.format(policy="swallow"))
    result = topology_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*server 0 came up on a corrupt config.json (empty)*"])


WORKER_SERVER = f"""
import sys
import pytest
from pytest_startup_guard import on_access, ready

def launch(server_fleet, mode):
    return server_fleet.launch(
        [sys.executable, {str(HERE / "worker_server.py")!r}, "{{port}}", mode],
        ready=ready.http("/health"), timeout=30, workers=1,
    )
"""

CAUGHT = """
from common import *

@pytest.mark.startup_races(transient=["pointer_swap"])
def test_caught(startup_case, hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    startup_case.apply(repo, "config.json", trigger=on_access(nth=1))
    fleet = launch(server_fleet, "shuts_down")
    with pytest.raises(AssertionError) as caught:
        startup_case.check(fleet)
    message = str(caught.value)
    assert "worker pid" in message, message
    # The supervisor reacted within the check: its own last line is in the report.
    assert "shutting down" in message, message
    assert "was ready, then exited with code 1" in message, message
"""


def test_a_failure_a_check_reported_is_no_second_teardown_error(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(common=WORKER_SERVER)
    guard_pytester.syspathinsert()
    guard_pytester.makepyfile(CAUGHT)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)
    assert "no check of the test saw it" not in result.stdout.str()


SUPERVISED_CORRUPT = """
from common import *

@pytest.mark.startup_races(corrupt=["not_json"])
def test_supervised(startup_case, hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", {{"config.json": {{"model_type": "gpt2"}}}})
    startup_case.apply(repo, "config.json")
    startup_case.check(launch(server_fleet, {mode!r}))
"""


def test_a_supervisor_that_exits_0_after_its_workers_failed_closed_passes(
    guard_pytester: pytest.Pytester,
) -> None:
    """``gives_up``: worker 1 fails on the file, the supervisor exits 0 and its daemonic
    worker 0 is ended with it: every reader failed closed."""
    guard_pytester.makepyfile(common=WORKER_SERVER)
    guard_pytester.syspathinsert()
    guard_pytester.makepyfile(SUPERVISED_CORRUPT.format(mode="gives_up"))
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)


def test_a_worker_that_exits_0_on_the_corrupt_file_fails_even_if_its_supervisor_exits_1(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(common=WORKER_SERVER)
    guard_pytester.syspathinsert()
    guard_pytester.makepyfile(SUPERVISED_CORRUPT.format(mode="exits_zero"))
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*worker pid * of server 0 exited with code 0 on a corrupt config.json*"]
    )


# A server without workers that reads its weights, and exits 0 on a broken file.
WEIGHTS_SERVER = """
import glob, os, sys
hub = os.environ["HF_HUB_CACHE"]
path = glob.glob(os.path.join(hub, "models--*", "snapshots", "*", "model.safetensors"))[0]
with open(path, "rb") as handle:
    data = handle.read()
print("model.safetensors is", "empty" if not data else "fine", flush=True)
sys.exit(0)
"""

WEIGHTS = f"""
import sys
import pytest
from pytest_startup_guard import ready

@pytest.mark.startup_races(corrupt=["empty"])
def test_weights(startup_case, hub_cache, server_fleet):
    repo = hub_cache.add_model(
        "acme/tiny", {{"config.json": {{"model_type": "gpt2"}}, "model.safetensors": b"weights"}}
    )
    startup_case.apply(repo, "model.safetensors")
    fleet = server_fleet.launch([sys.executable, "-c", {WEIGHTS_SERVER!r}, "{{port}}"],
                                count=1, ready=ready.tcp(), timeout=20)
    startup_case.check(fleet)
"""


def test_the_verdict_names_the_corrupted_file(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(WEIGHTS)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*server 0 exited with code 0 on a corrupt model.safetensors*"])
    assert "corrupt config" not in result.stdout.str()
