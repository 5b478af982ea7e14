"""File-system errors as a network file system gives them, on a server that publishes a kernel
into a shared cache (``servers/shared_fs_server.py``).

    pytest -p startup_guard examples/test_incident_fs.py

- ``fs_error("ESTALE", ..., op="rename")``: the publishing ``os.replace`` fails once, as on the
  NFS cache of pytorch/pytorch#173679;
- ``fs_error("ENOSYS", ..., op="flock", times=None)``: the mount has no ``flock``, as in
  huggingface/huggingface_hub#2399;
- ``network_fs(cache)``: member 0 moves the kernel folder aside while member 1 still uses it:
  member 1's next read gets ``ESTALE``, as in hiyouga/LlamaFactory#3388.

The ``naive`` server dies of each (the case fails: caught); the ``retry`` one survives.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from faults import KERNEL, faults_met, shared_fs_server

from pytest_startup_guard import ServerFleet, fs_error, network_fs, ready

TIMEOUT = float(os.environ.get("ZOO_TIMEOUT", "8"))
CASES = [
    (fault, policy)
    for fault in ("fs_error_rename", "fs_error_flock", "network_fs")
    for policy in ("naive", "retry")
]


@pytest.mark.parametrize(
    ("fault", "policy"), CASES, ids=[f"fs-{fault}-{policy}" for fault, policy in CASES]
)
def test_shared_cache_on_a_network_file_system(
    shared_dir: Path,
    server_fleet: ServerFleet,
    fault: str,
    policy: str,
    record_property: pytest.RecordProperty,
) -> None:
    rotate_by = None
    if fault == "fs_error_rename":
        faults = [fs_error("ESTALE", shared_dir / "kernels", op="rename")]
    elif fault == "fs_error_flock":
        faults = [fs_error("ENOSYS", shared_dir / "kernels.lock", op="flock", times=None)]
    else:
        (shared_dir / "kernels").mkdir()
        (shared_dir / "kernels" / "matmul.json").write_text(json.dumps(KERNEL))
        faults, rotate_by = network_fs(shared_dir), 0
    fleet = server_fleet.launch(
        shared_fs_server(shared_dir, policy, rotate_by=rotate_by),
        count=2,
        ready=ready.http("/health"),
        timeout=TIMEOUT,
        faults=faults,
    )
    record_property("caught", faults_met(fleet))  # for make demo: each fault met
    fleet.assert_all_ready()
