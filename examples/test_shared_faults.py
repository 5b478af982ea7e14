"""Beyond the hub cache: a shared compile cache raced, a build lock a dead process left, ports.

    pytest -p startup_guard examples/test_shared_faults.py

Each test is one server policy under one fault. ``faults.EXPECTED`` says which policies pass:
the kernel server without a retry dies on every generic race, the build server that waits like
torch's ``FileBaton`` hangs on a stale lock (caught at the readiness time-out, the lock named),
the port server that dies on a busy port is named with its fault, and the ones that retry, fail
closed, break the lock or move to another port pass.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from faults import KERNEL, kernel_server, lock_server, port_server

from pytest_startup_guard import ServerFleet, StartupCase, port_taken, ready, same_port

SERVERS = int(os.environ.get("ZOO_SERVERS", "2"))
TIMEOUT = float(os.environ.get("ZOO_TIMEOUT", "8"))
LOCK_TIMEOUT = float(os.environ.get("FAULTS_LOCK_TIMEOUT", "4"))


@pytest.mark.startup_races(
    transient=["file_replace", "file_rewrite", "partial_write", "folder_move"]
)
@pytest.mark.parametrize("policy", ["naive", "retry"])
def test_kernel_cache(
    startup_case: StartupCase, shared_dir: Path, server_fleet: ServerFleet, policy: str
) -> None:
    entry = shared_dir / "kernels" / "matmul.json"
    entry.parent.mkdir()
    entry.write_text(json.dumps(KERNEL))
    startup_case.apply(entry)
    fleet = server_fleet.launch(
        kernel_server(shared_dir, policy),
        count=SERVERS,
        ready=ready.http("/health"),
        timeout=TIMEOUT,
    )
    startup_case.check(fleet)


def build_under_a_stale_lock(
    startup_case: StartupCase, shared_dir: Path, server_fleet: ServerFleet, policy: str
) -> None:
    """Leave the case's stale lock in the build folder, start the build servers, judge them."""
    startup_case.apply(shared_dir / "build" / "lock")
    fleet = server_fleet.launch(
        lock_server(shared_dir / "build", policy),
        count=SERVERS,
        ready=ready.http("/health"),
        timeout=LOCK_TIMEOUT,
    )
    startup_case.check(fleet)


@pytest.mark.startup_races(stale=["stale_lock"])
@pytest.mark.parametrize("policy", ["wait", "fail", "break"])
def test_build_lock(
    startup_case: StartupCase, shared_dir: Path, server_fleet: ServerFleet, policy: str
) -> None:
    build_under_a_stale_lock(startup_case, shared_dir, server_fleet, policy)


@pytest.mark.startup_races(stale=["stale_soft_lock"])
@pytest.mark.parametrize("policy", ["soft"])
def test_soft_build_lock(
    startup_case: StartupCase, shared_dir: Path, server_fleet: ServerFleet, policy: str
) -> None:
    build_under_a_stale_lock(startup_case, shared_dir, server_fleet, policy)


PORT_CASES = [("port_taken", "die"), ("port_taken", "retry"), ("same_port", "die"),
              ("same_port", "other_port")]  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "policy"), PORT_CASES, ids=[f"port-{fault}-{policy}" for fault, policy in PORT_CASES]
)
def test_ports(server_fleet: ServerFleet, fault: str, policy: str) -> None:
    faults = [port_taken(member=1, hold=0.5)] if fault == "port_taken" else [same_port((0, 1))]
    fleet = server_fleet.launch(
        port_server(policy), count=2, ready=ready.http("/health"), timeout=TIMEOUT, faults=faults
    )
    assert fleet.faults[0].met
    for server in fleet.servers:  # the first failure line names the fault that killed a server
        assert server.ready, f"server {server.index} did not come up: {server.reason}"
