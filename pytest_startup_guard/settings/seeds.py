"""Seeds: one per run (given or drawn, shared with xdist workers), one per test derived from it."""

from __future__ import annotations

import os
import shlex


def draw_run_seed() -> int:
    return int.from_bytes(os.urandom(4), "big")


def seed_for_test(run_seed: int, nodeid: str) -> int:
    """Stable per test: the same run seed and node id always give the same test seed."""
    import hashlib  # loads OpenSSL: not at plugin import

    digest = hashlib.sha256(f"{run_seed}:{nodeid}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def stress_run_seed(run_seed: int, round_index: int) -> int:
    """The run seed of round ``round_index`` of ``--startup-guard-stress`` (round 0: the run's
    own), so that each round replays with a plain ``--startup-guard-seed``."""
    if round_index == 0:
        return run_seed
    import hashlib

    digest = hashlib.sha256(f"{run_seed}:stress:{round_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def replay_command(run_seed: int, nodeid: str) -> str:
    return f"pytest -p startup_guard --startup-guard-seed={run_seed} {shlex.quote(nodeid)}"
