"""A supervisor that hides a dead worker: ``uvicorn --workers 2`` behind a TCP probe.

    pytest -p startup_guard examples/test_workers.py

uvicorn's supervisor binds the socket, so a TCP probe (a load balancer's or Kubernetes'
``tcpSocket`` check) is answered from the start, whatever its workers do; and when a worker's
lifespan start-up fails (exit code 3) the supervisor stops with exit code **0**. Neither the
probe nor the exit code shows the dead worker. ``workers=2`` makes the plugin judge each
worker: under ``pointer_swap`` at each worker's third access of the repo (the JSON open) the
naive workers die and the test fails naming a dead worker's pid, its exit code and the OSError
on config.json; the workers that retry (``RETRY=1``: 3 tries, 0.1 s then 0.2 s apart) come up
and the same case passes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_startup_guard import FakeHubCache, ServerFleet, StartupCase, on_access, ready

SERVERS = Path(__file__).resolve().parent / "servers"
WORKERS = 2
UVICORN = [
    str(Path(sys.executable).parent / "uvicorn"), "asgi_app:app", "--app-dir", str(SERVERS),
    "--host", "127.0.0.1", "--port", "{port}", "--workers", str(WORKERS),
]  # fmt: skip


@pytest.mark.startup_races(transient=["pointer_swap"])
@pytest.mark.parametrize("policy", ["naive", "retry"])
def test_uvicorn_workers(
    startup_case: StartupCase, hub_cache: FakeHubCache, server_fleet: ServerFleet, policy: str
) -> None:
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    startup_case.apply(repo, "config.json", trigger=on_access(nth=3))
    fleet = server_fleet.launch(
        UVICORN,
        count=1,
        workers=WORKERS,  # ready only once both workers are up; a dead one fails the member
        ready=ready.tcp(),  # answered by the supervisor's socket, dead workers or not
        env={"REPO_ID": "acme/tiny", "RETRY": "1" if policy == "retry" else "0"},
    )
    startup_case.check(fleet)
