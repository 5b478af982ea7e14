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

# The reason each verdict must show, as ``run_demo.py`` observes it (the servers that did not
# start up, their state, exit code, hits and exception; the race and what it hit): every regular
# expression of (policy, kind) must match, ``{case}`` and ``{error}`` filled in (``reason``).
_HIT = r"hit [1-9]\d*x on config\.json"
REASON: dict[tuple[str, str], tuple[str, ...]] = {
    ("naive", "transient"): (r"server \d exited with code 1, [1-9]\d* hits?: .*\bOSError: ", _HIT),
    ("retry", "transient"): (r"^2 of 2 up", _HIT, r"2 absorbed it"),
    ("swallow", "transient"): (
        r"server \d rejected, [1-9]\d* hits?: GET /config answered 200 .*\"fallback\": true",
        _HIT,
    ),
    ("slow_retry", "transient"): (r"^2 of 2 up", _HIT, r"2 absorbed it"),
    ("naive", "corrupt"): (r"^0 of 2 up", r"server \d exited with code 1: .*\b{error}: "),
    ("retry", "corrupt"): (r"^0 of 2 up", r"server \d exited with code 1: .*\b{error}: "),
    ("swallow", "corrupt"): (
        r"server \d rejected: GET /config answered 200 .*\"fallback\": true",
        r"came up on a corrupt config\.json \({case}\)",
    ),
    ("slow_retry", "corrupt"): (
        r"server \d hung: ready\.http\('/config'",
        r"hung: still running on a corrupt config",
    ),
}
# What transformers.AutoConfig raises on the demo's corruptions (make test checks them all).
CORRUPT_ERROR = {"empty": "OSError", "no_model_type": "ValueError"}


def reason(policy: str, kind: str, case: str) -> tuple[str, ...]:
    """The regular expressions a zoo case's observed reason must match (see ``REASON``)."""
    error = CORRUPT_ERROR.get(case, r"\w+Error")
    return tuple(p.format(case=case, error=error) for p in REASON[(policy, kind)])


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
