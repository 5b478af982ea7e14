"""File accesses made in native code: ninja's build log in a shared build folder, as
flashinfer-ai/flashinfer#2338 met it.

    pytest -p startup_guard examples/test_incident_native.py

Each server runs a native build step at start-up (``servers/native_build.c``, compiled here with
the system's C compiler) that opens ``<build>/.ninja_log`` for append, as ninja does. The fleet
is launched with ``native_accesses=True``, so that C ``fopen`` is an access point: the race
``folder_move`` on the build folder opens right before it (``on_access()``), as another build
that moves or removes the shared folder would. ``faults.EXPECTED`` (row ``native_folder_move``)
says which pass: the build that tries once fails, and its server with it (caught); the one that
retries the open comes up.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from faults import native_build_server, native_build_tool

from pytest_startup_guard import HubRace, ServerFleet, on_access, ready

TIMEOUT = float(os.environ.get("ZOO_TIMEOUT", "8"))
POLICIES = ["naive", "retry"]


@pytest.mark.parametrize("policy", POLICIES, ids=[f"native-folder_move-{p}" for p in POLICIES])
def test_build_log_in_a_shared_build_folder(
    shared_dir: Path, tmp_path: Path, hub_race: HubRace, server_fleet: ServerFleet, policy: str
) -> None:
    tool = native_build_tool(tmp_path / "tools")  # built before the fleet: not raced
    build = shared_dir / "build"
    build.mkdir()
    (build / ".ninja_log").write_text("# ninja log v5\n")
    race = hub_race.arm_path("folder_move", build / ".ninja_log", trigger=on_access())
    fleet = server_fleet.launch(
        native_build_server(build, tool, policy),
        count=2,
        ready=ready.http("/health"),
        timeout=TIMEOUT,
        native_accesses=True,
    )
    assert race.hits, "the race never met the native build's open"
    fleet.assert_all_ready()
