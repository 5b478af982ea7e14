"""Ports a server picks itself, taken before it binds them (``servers/probe_server.py``).

    pytest -p startup_guard examples/test_incident_ports.py

The server picks its store's port as serving stacks do (binds port 0, or scans from a base,
reads the port, closes the socket) and binds it for real later, as PyTorch's ``TCPStore``
after ``get_open_port()`` (``DistNetworkError ... EADDRINUSE``):

- ``port_stolen``: member 1's port is taken right after its probe, its real bind in Python;
- ``port_stolen_native``: the same, the real bind in native code (libc through ``ctypes``, no
  ``socket.bind`` event), as ``TCPStore`` and libzmq bind;
- ``port_stolen_scan``: both members scan from one base (vLLM's ``VLLM_PORT``,
  vllm-project/vllm#43206): their probes return the same port, member 0 binds it first.

The ``die`` server exits with ``Address already in use`` (the test fails: caught, the fault
named); the ``retry`` one picks again and comes up.
"""

from __future__ import annotations

import os
import socket

import pytest
from faults import probe_server

from pytest_startup_guard import ServerFleet, port_stolen, ready

TIMEOUT = float(os.environ.get("ZOO_TIMEOUT", "8"))
CASES = [
    (fault, policy)
    for fault in ("port_stolen", "port_stolen_native", "port_stolen_scan")
    for policy in ("die", "retry")
]


def scan_base() -> int:
    """A base both members scan from: a port the system just handed out (above the ports
    the fleet leases for the members' own ``{port}``)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("fault", "policy"), CASES, ids=[f"port-{fault}-{policy}" for fault, policy in CASES]
)
def test_a_port_the_server_picked(server_fleet: ServerFleet, fault: str, policy: str) -> None:
    if fault == "port_stolen_scan":
        command = probe_server(policy, pick="scan", base=scan_base())
        faults = [port_stolen(member=0, by=1)]
    else:
        bind = "native" if fault == "port_stolen_native" else "python"
        command = probe_server(policy, bind=bind)
        faults = [port_stolen(member=1, hold=0.5)]
    fleet = server_fleet.launch(
        command, count=2, ready=ready.http("/health"), timeout=TIMEOUT, faults=faults
    )
    assert fleet.faults[0].met
    for server in fleet.servers:  # the first failure line names the fault that killed a server
        assert server.ready, f"server {server.index} did not come up: {server.reason}"
