"""The bundled examples are a user's suite: run them with ``pytest -p startup_guard examples/``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # zoo.py, own_races.py

from own_races import SnapshotResync

from pytest_startup_guard import Race


def pytest_startup_guard_races() -> dict[str, type[Race]]:
    """Make the suite's own races known by name to hub_race.arm and startup_races."""
    return {"snapshot_resync": SnapshotResync}
