"""Beyond the hub cache: a shared compile cache raced, and a build lock a dead process left.

    pytest -p startup_guard examples/test_shared_faults.py

Each test is one server policy under one fault. ``faults.EXPECTED`` says which policies pass:
the kernel server without a retry dies on every generic race, the build server that waits like
torch's ``FileBaton`` hangs on a stale lock (caught at the readiness time-out, the lock named),
and the ones that retry, fail closed or break the lock pass.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from faults import KERNEL, kernel_server, lock_server

from pytest_startup_guard import ServerFleet, StartupCase, ready

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


@pytest.mark.startup_races(stale=["stale_lock"])
@pytest.mark.parametrize("policy", ["wait", "fail", "break"])
def test_build_lock(
    startup_case: StartupCase, shared_dir: Path, server_fleet: ServerFleet, policy: str
) -> None:
    startup_case.apply(shared_dir / "build" / "lock")
    fleet = server_fleet.launch(
        lock_server(shared_dir / "build", policy),
        count=SERVERS,
        ready=ready.http("/health"),
        timeout=LOCK_TIMEOUT,
    )
    startup_case.check(fleet)


@pytest.mark.startup_races(stale=["stale_soft_lock"])
@pytest.mark.parametrize("policy", ["soft"])
def test_soft_build_lock(
    startup_case: StartupCase, shared_dir: Path, server_fleet: ServerFleet, policy: str
) -> None:
    startup_case.apply(shared_dir / "build" / "lock")
    fleet = server_fleet.launch(
        lock_server(shared_dir / "build", policy),
        count=SERVERS,
        ready=ready.http("/health"),
        timeout=LOCK_TIMEOUT,
    )
    startup_case.check(fleet)
