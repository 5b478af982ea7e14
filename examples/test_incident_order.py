"""Orders across members: two writers interleaved step by step, and a head that listens late.

    pytest -p startup_guard examples/test_incident_order.py

- ``interleave``: two servers generate one header into a shared workspace; member 1 reads it
  before member 0 appends, and member 1 appends after member 0 (NVIDIA/TensorRT-LLM#18897:
  duplicate definitions). The ``naive`` server (read, then append) ends with a redefinition;
  the ``atomic`` one (write a whole file, then ``os.replace``) survives every order.
- ``listen_late``: member 0, the head, binds its port only after the workers tried to join
  (ai-dynamo/dynamo#14115). A ``naive`` worker joins once and dies; one that ``wait``s for the
  head survives.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from faults import cluster_server, codegen_server, faults_met

from pytest_startup_guard import ServerFleet, interleave, listen_late, ready

TIMEOUT = float(os.environ.get("ZOO_TIMEOUT", "8"))


@pytest.mark.parametrize(
    "policy", ["naive", "atomic"], ids=["order-interleave-naive", "order-interleave-atomic"]
)
def test_two_generators(
    shared_dir: Path, server_fleet: ServerFleet, policy: str, record_property: pytest.RecordProperty
) -> None:
    header = shared_dir / "generated.h"
    faults = [
        interleave(header, first=(1, 1), then=(0, 2)),  # member 1 reads before member 0 writes
        interleave(header, first=(0, 2), then=(1, 2)),  # member 1 writes after member 0
    ]
    fleet = server_fleet.launch(
        codegen_server(shared_dir, policy),
        count=2,
        ready=ready.http("/health"),
        timeout=TIMEOUT,
        faults=faults,
    )
    record_property("caught", faults_met(fleet))  # for make demo: each fault met
    fleet.assert_all_ready()


@pytest.mark.parametrize(
    "policy", ["naive", "wait"], ids=["order-listen_late-naive", "order-listen_late-wait"]
)
def test_workers_join_a_head(
    server_fleet: ServerFleet, policy: str, record_property: pytest.RecordProperty
) -> None:
    fleet = server_fleet.launch(
        cluster_server(policy),
        count=3,
        ready=ready.http("/health"),
        timeout=TIMEOUT,
        faults=[listen_late(member=0)],
    )
    record_property("caught", faults_met(fleet))
    fleet.assert_all_ready()
