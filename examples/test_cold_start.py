"""Cold start at scale: 4 members start at once on an empty cache and download their model from
a hub on loopback (``servers/download_server.py``: the real ``snapshot_download``, then
``transformers.AutoConfig`` from the snapshot).

    pytest -p startup_guard examples/test_cold_start.py

``hub_remote`` serves the repo on 127.0.0.1 and points every member at it (``HF_ENDPOINT``,
online); its cache is empty unless the test also uses ``hub_cache``. The verdict is two
checks: every member came up, and the cache they share holds the commit whole and shared
(``hub_remote.assert_cache_whole``: the ref names it, every file points to its blob, one blob
per file, nothing half-written left). Per policy:

- ``every``: all 4 download; huggingface_hub's lock per blob keeps the cache whole: passes;
- ``rank0``: rank 0 downloads, ranks 1-3 wait until the cache holds the commit, then read it
  offline: passes;
- ``naive``: ranks 1-3 read the cache at once. On a warm cache that works (a warm-cache test
  never sees the bug); on a cold one they find nothing and die (caught: the members and their
  ``LocalEntryNotFoundError``).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_startup_guard import FakeHubCache, HubRemote, Server, ServerFleet, ready

SERVER = Path(__file__).resolve().parent / "servers" / "download_server.py"
POLICIES = ("every", "rank0", "naive")
MEMBERS = 4
REPO = "acme/tiny"
FILES: dict[str, Any] = {
    "config.json": {"model_type": "gpt2", "n_layer": 2, "n_embd": 64},
    "generation_config.json": {"max_new_tokens": 16},
    "tokenizer_config.json": {"model_max_length": 128},
    "model.safetensors": bytes(range(256)) * 64,  # 16 KiB of weights
}
TIMEOUT = float(os.environ.get("COLD_START_TIMEOUT", "30"))
# How long ranks 1-3 of ``rank0`` wait for the commit: well inside the fleet's time-out, so a
# rank 0 that never finishes makes them fail closed, not hang.
WAIT_TIMEOUT = TIMEOUT / 2


def download_server(policy: str) -> list[str]:
    return [
        sys.executable, str(SERVER), "--model", REPO, "--port", "{port}",
        "--policy", policy, "--rank", "{index}", "--wait-timeout", str(WAIT_TIMEOUT),
    ]  # fmt: skip


def blobs(hub_remote: HubRemote) -> int:
    """The blobs the members' cache holds for the repo (one per file when it is shared)."""
    folder = hub_remote.cache.hub_dir / ("models--" + REPO.replace("/", "--")) / "blobs"
    return sum(1 for blob in folder.glob("*") if not blob.name.endswith(".lock"))


def failure(server: Server) -> str:
    """'member 1 exited with code 1 after 1.08 s: LocalEntryNotFoundError: Cannot find ...'."""
    if server.state == "exited":
        what = f"member {server.index} exited with code {server.returncode}"
        what += f" after {server.seconds_to_exit:.2f} s"
    else:
        what = f"member {server.index}: {server.status()}"
    for cause in server.root_causes()[:1]:  # huggingface_hub's own error, without its module
        what += ": " + re.sub(r"^[\w.]+\.(?=\w+(Error|Exception))", "", cause)
    return what


def start_fleet(
    hub_remote: HubRemote,
    server_fleet: ServerFleet,
    policy: str,
    record_property: pytest.RecordProperty,
) -> None:
    """Launch the 4 members at once, say what they did, then give the verdict."""
    __tracebackhide__ = True
    served = len(hub_remote.requests)
    fleet = server_fleet.launch(
        download_server(policy),
        count=MEMBERS,
        ready=ready.http("/health"),
        timeout=TIMEOUT,
        env=hub_remote.env,
    )
    up = sum(1 for server in fleet.servers if server.ready)
    served = len(hub_remote.requests) - served
    record_property(
        "caught",
        f"{up}/{MEMBERS} ready, {served} request{'' if served == 1 else 's'} served,"
        f" {blobs(hub_remote)} blobs for {len(FILES)} files",
    )
    problems = [failure(server) for server in fleet.servers if not server.ready]
    try:
        hub_remote.assert_cache_whole(REPO)
    except AssertionError as error:
        problems.append(f"the cache is not whole: {error}")
    if problems:
        raise AssertionError(
            f"the start-up of {MEMBERS} members ({policy}) failed:\n"
            + "\n".join(f"- {problem}" for problem in problems)
        )
    fleet.assert_all_ready()  # and none of their workers failed


@pytest.mark.parametrize("policy", POLICIES)
def test_cold_cache(
    hub_remote: HubRemote,
    server_fleet: ServerFleet,
    policy: str,
    record_property: pytest.RecordProperty,
) -> None:
    hub_remote.add_model(REPO, FILES)
    start_fleet(hub_remote, server_fleet, policy, record_property)


@pytest.mark.parametrize("policy", POLICIES)
def test_warm_cache(
    hub_cache: FakeHubCache,
    hub_remote: HubRemote,
    server_fleet: ServerFleet,
    policy: str,
    record_property: pytest.RecordProperty,
) -> None:
    """The same fleet on a warm cache: the test's ``hub_cache``, where the commit was
    downloaded once before (in this process, by the real ``snapshot_download``)."""
    from huggingface_hub import snapshot_download

    hub_remote.add_model(REPO, FILES)
    snapshot_download(REPO)
    start_fleet(hub_remote, server_fleet, policy, record_property)
