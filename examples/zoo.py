"""What the bug zoo's servers are expected to do, case by case.

Shared by the zoo's tests (``test_zoo.py``), ``run_demo.py`` and the plugin's own test of the
zoo: a verdict the plugin observes must match this table.
"""

from __future__ import annotations

import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parent / "servers" / "config_server.py"
POLICIES = ("naive", "retry", "swallow", "slow_retry")
LOADERS = ("autoconfig", "hub_json")
CONFIG = {"config.json": {"model_type": "gpt2", "n_layer": 3}}

# policy -> (transient cases, corrupt cases): "pass" when the case's verdict holds.
EXPECTED = {
    "naive": ("fail", "pass"),  # dies on a transient race; fails closed on corruption
    "retry": ("pass", "pass"),  # survives the race, still fails on a real corruption
    "swallow": ("fail", "fail"),  # comes up on its fallback: hides both (caught by expect)
    "slow_retry": ("pass", "fail"),  # survives the race, hangs on a corruption
}

WHY = {
    ("naive", "transient"): "dies on the race",
    ("swallow", "transient"): "came up on its fallback",
    ("swallow", "corrupt"): "hid the corruption",
    ("slow_retry", "corrupt"): "hangs",
}


def expected(policy: str, kind: str) -> str:
    transient, corrupt = EXPECTED[policy]
    return transient if kind == "transient" else corrupt


def command(policy: str, loader: str) -> list[str]:
    return [
        sys.executable,
        str(SERVER),
        "--model",
        "acme/tiny",
        "--port",
        "{port}",
        "--policy",
        policy,
        "--loader",
        loader,
    ]
