"""The test side of a chaos refresher: start its process, read its windows, stop it.

The refresher itself (``refresher.py``) runs in a process of its own, outside the plan, so that
its operations are not reported as accesses of the code under test; it logs each window it
opened (monotonic open and close times) to a file that this side reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.races.armed import Window
from pytest_startup_guard.races.base import Race, Target
from pytest_startup_guard.races.triggers import Chaos
from pytest_startup_guard.runtime.protocol import PLAN_ENV

READY_SECONDS = 30.0  # how long a refresher may take to import the race and say it is ready


class ChaosRefresher:
    """One running refresher process for one armed race (``chaos(...)`` trigger)."""

    def __init__(
        self, race: Race, target: Target, trigger: Chaos, seed: int, folder: Path, label: str
    ) -> None:
        """Start the refresher and wait until it runs; ``label`` names the race in errors."""
        from pytest_startup_guard.races.refresher import RefresherSpec, dump

        self.log = Path(tempfile.mkstemp(prefix="refresher-", suffix=".log", dir=folder)[1])
        env = {key: value for key, value in os.environ.items() if key != PLAN_ENV}  # not under test
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest_startup_guard.races.refresher"],
            stdin=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert self.process.stdin is not None
        self._stdin = self.process.stdin
        dump(
            RefresherSpec(race, target, trigger.gap, trigger.hold, seed, str(self.log)), self._stdin
        )
        deadline = time.monotonic() + READY_SECONDS
        while "ready" not in self.log.read_text() and time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise StartupGuardError(
                    f"the chaos refresher for {label} exited with code"
                    f" {self.process.returncode} before it started (is the race class importable?)"
                )
            time.sleep(0.005)

    def windows(self) -> list[Window]:
        """Every window the refresher has opened so far, as logged."""
        windows = []
        for line in self.log.read_text().splitlines():
            parts = line.split()
            if parts and parts[0] == "window" and len(parts) == 3:
                windows.append(Window(float(parts[1]), float(parts[2])))
        return windows

    def stop(self) -> None:
        """Ask the refresher to stop (it closes its window first) and wait for it; idempotent."""
        if self.process.returncode is not None:
            return
        try:
            self._stdin.write(b"x")
            self._stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


__all__ = ["ChaosRefresher"]
