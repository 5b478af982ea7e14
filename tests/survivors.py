"""Which processes a test's fleets started, and that none of them outlives the test.

An inner test appends every pid of its fleets' trees to the file ``$FLEET_PIDS`` (one a line);
the outer test reads them back and waits, a bounded time, for each to be gone.
"""

from __future__ import annotations

import time

import psutil
import pytest


def recorded_pids(pytester: pytest.Pytester) -> set[int]:
    path = pytester.path / "fleet-pids.txt"
    return {int(line) for line in path.read_text().split()} if path.exists() else set()


def assert_none_alive(pids: set[int], within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while True:
        alive = [
            pid
            for pid in pids
            if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        ]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not alive, f"processes survived their test: {alive}"
