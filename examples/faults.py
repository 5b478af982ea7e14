"""What the servers of the faults beyond the hub cache are expected to do, fault by fault.

Shared by ``test_shared_faults.py``, ``run_demo.py`` and ``benchmarks/bench_faults.py``: a
verdict the plugin observes must match this table. Each fault is shown on a server that does
not handle it (its verdict must fail: the fault is caught) and on one that does (it must pass).
"""

from __future__ import annotations

import sys
from pathlib import Path

SERVERS = Path(__file__).resolve().parent / "servers"

# A compile cache entry the kernel server loads at start-up.
KERNEL = {"kernel": "matmul", "blocks": list(range(64))}

# fault -> {policy: expected verdict}; "pass" when the case's verdict holds.
EXPECTED: dict[str, dict[str, str]] = {
    "file_replace": {"naive": "fail", "retry": "pass"},
    "file_rewrite": {"naive": "fail", "retry": "pass"},
    "partial_write": {"naive": "fail", "retry": "pass"},
    "folder_move": {"naive": "fail", "retry": "pass"},
    "stale_lock": {"wait": "fail", "fail": "pass", "break": "pass"},
    "stale_soft_lock": {"soft": "pass"},
    "port_taken": {"die": "fail", "retry": "pass"},
    "same_port": {"die": "fail", "other_port": "pass"},
}

WHY = {
    "naive": "dies on the race",
    "wait": "waits forever on the stale lock",
    "die": "dies on the busy port",
}


def kernel_server(cache: Path, policy: str) -> list[str]:
    return [
        sys.executable,
        str(SERVERS / "cache_server.py"),
        "--port",
        "{port}",
        "--cache",
        str(cache),
        "--policy",
        policy,
    ]


def lock_server(build: Path, policy: str) -> list[str]:
    style = ["--style", "soft"] if policy == "soft" else ["--on-stale", policy]
    return [
        sys.executable,
        str(SERVERS / "lock_server.py"),
        "--port",
        "{port}",
        "--build",
        str(build),
        "--lock-timeout",
        "1",
        *style,
    ]


def port_server(policy: str) -> list[str]:
    return [
        sys.executable,
        str(SERVERS / "port_server.py"),
        "--port",
        "{port}",
        "--on-busy",
        policy.replace("_", "-"),
    ]
