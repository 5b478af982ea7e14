"""Locks anywhere: a download lock that does not exclude, held a moment, or held for good
(``servers/locked_writer_server.py``).

    pytest -p startup_guard examples/test_incident_locks.py

Two servers download their model into one shared folder under ``download.lock``:

- ``lock_not_exclusive``: ``flock`` locks nothing, as on Lustre, GPFS and some NFS mounts
  (huggingface/huggingface_hub#4306, ibm-granite/granite.build#322). The ``naive`` server
  appends into one ``model.bin.incomplete`` as huggingface_hub did: both write into it, the
  model is corrupt, the servers die naming it and the fault (caught); the ``safe`` one writes a
  file of its own and moves it into place, and comes up;
- ``lock_held``: another process holds the lock for a download's while (0.5 s); the server that
  ``wait``s comes up, the one that gives up after 0.1 s (``timeout``) does not (caught);
- ``lock_held_for_good``: the holder never lets go (huggingface/datasets#329: ``FileLock``
  acquire never returns). The server that ``wait``s hangs, named as hanging on the lock (caught);
  the one with a ``timeout`` fails closed naming it, as it must.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from faults import faults_met, locked_writer_server

from pytest_startup_guard import ServerFleet, StartupCase, lock_not_exclusive, ready

TIMEOUT = float(os.environ.get("ZOO_TIMEOUT", "8"))
LOCK_TIMEOUT = float(os.environ.get("FAULTS_LOCK_TIMEOUT", "4"))


@pytest.mark.parametrize(
    "policy",
    ["naive", "safe"],
    ids=["lock-lock_not_exclusive-naive", "lock-lock_not_exclusive-safe"],
)
def test_a_lock_that_does_not_exclude(
    shared_dir: Path, server_fleet: ServerFleet, policy: str, record_property: pytest.RecordProperty
) -> None:
    fleet = server_fleet.launch(
        locked_writer_server(shared_dir, policy),
        count=2,
        ready=ready.http("/health"),
        timeout=TIMEOUT,
        faults=[lock_not_exclusive(shared_dir / "download.lock")],
    )
    record_property("caught", faults_met(fleet))  # for make demo: the fault met
    for server in fleet.servers:  # the failure line names the fault that let both in
        assert server.ready, f"server {server.index} did not come up: {server.reason}"


@pytest.mark.startup_races(transient=["lock_held"])
@pytest.mark.parametrize("policy", ["wait", "timeout"])
def test_a_lock_held_for_a_moment(
    startup_case: StartupCase, shared_dir: Path, server_fleet: ServerFleet, policy: str
) -> None:
    startup_case.apply(shared_dir / "download.lock")
    fleet = server_fleet.launch(
        locked_writer_server(shared_dir, policy, lock_timeout=0.1),
        count=2,
        ready=ready.http("/health"),
        timeout=TIMEOUT,
    )
    startup_case.check(fleet)


@pytest.mark.startup_races(stale=["lock_held_for_good"])
@pytest.mark.parametrize("policy", ["wait", "timeout"])
def test_a_lock_held_for_good(
    startup_case: StartupCase, shared_dir: Path, server_fleet: ServerFleet, policy: str
) -> None:
    startup_case.apply(shared_dir / "download.lock")
    fleet = server_fleet.launch(
        locked_writer_server(shared_dir, policy, lock_timeout=1.0),
        count=2,
        ready=ready.http("/health"),
        timeout=LOCK_TIMEOUT,
    )
    startup_case.check(fleet)
