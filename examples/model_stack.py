"""How the model stack is launched, for its example tests, the ``truth`` benchmark and the
suite's tests: two single-process servers (``servers/model_server.py``), or one ``uvicorn
--workers 2`` (``servers/model_app.py``) whose workers are each judged.

Each server is told what it must load (``tiny_model.expected``, in ``$EXPECT``) and, with
``load_log``, appends its own account (each load error met with its file, loaded, failed) to
that file. ``native_accesses=True``: the reads in Rust (``tokenizer.json`` by ``tokenizers``,
the weights by ``safetensors``) are accesses too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tiny_model import expected

from pytest_startup_guard import Fleet, ServerFleet, ready

SERVERS = Path(__file__).resolve().parent / "servers"
REPO = "acme/stack"
WORKERS = 2
TOPOLOGIES = ("single", "workers")
POLICIES = ("naive", "retry")


def stack_command(policy: str, topology: str, weights: str) -> list[str]:
    if topology == "single":
        return [
            sys.executable, str(SERVERS / "model_server.py"), "--model", REPO,
            "--port", "{port}", "--policy", policy, "--weights", weights,
        ]  # fmt: skip
    return [
        str(Path(sys.executable).parent / "uvicorn"), "model_app:app", "--app-dir", str(SERVERS),
        "--host", "127.0.0.1", "--port", "{port}", "--workers", str(WORKERS),
    ]  # fmt: skip


def launch_stack(
    server_fleet: ServerFleet,
    policy: str,
    topology: str,
    *,
    sharded: bool = False,
    load_log: Path | None = None,
    **options: Any,
) -> Fleet:
    """Two single-process members, or one member of ``WORKERS`` uvicorn workers."""
    want = expected(sharded=sharded)
    env = {"REPO_ID": REPO, "RETRY": str(int(policy == "retry")), "WEIGHTS": want["weights"]}
    env["EXPECT"] = json.dumps(want)
    if load_log is not None:
        env["LOAD_LOG"] = str(load_log)
    return server_fleet.launch(
        stack_command(policy, topology, want["weights"]),
        count=2 if topology == "single" else 1,
        ready=ready.http("/health"),
        env=env,
        native_accesses=True,
        **({"workers": WORKERS} if topology == "workers" else {}),
        **options,
    )
