"""A model stack under a race on its weights: config, tokenizer and weights loaded at start-up.

    pytest -p startup_guard examples/test_model_stack.py

The server (``servers/model_server.py``, or ``servers/model_app.py`` under ``uvicorn --workers
2``; ``model_stack.py`` launches them) loads a tiny model built here (``tiny_model.py``, no
download): ``AutoConfig``, then ``AutoTokenizer`` (``tokenizer.json`` read in Rust by
``tokenizers``), then the weights through ``hf_hub_download`` and ``safetensors`` (read in
Rust), in one file or in two shards. It knows what it should have loaded and fails closed on
anything else, and it says each load error it meets, with the file.

``pointer_swap`` on the weights with the default trigger: each process's window opens at its
own first access of the weights' pointer, the last thing it loads. The ``naive`` server dies
of it (the case fails, naming the weights); the one that retries the whole load (bounded,
jittered) comes up, and the case passes. The same as one process per member (2 members) and
as ``uvicorn --workers 2`` (one member, each worker judged). ``native_accesses=True``: the
reads in Rust are accesses too, so each hit is the read that met the change, wherever it was
made.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from model_stack import REPO, launch_stack  # found through conftest.py, as zoo.py is
from tiny_model import SHARDS, SINGLE_WEIGHTS, add_tiny_model

from pytest_startup_guard import FakeHubCache, ServerFleet, StartupCase


@pytest.mark.startup_races(transient=["pointer_swap"])
@pytest.mark.parametrize("topology", ["single", "workers"])
@pytest.mark.parametrize("policy", ["naive", "retry"])
def test_weights_raced(
    startup_case: StartupCase,
    hub_cache: FakeHubCache,
    server_fleet: ServerFleet,
    tmp_path: Path,
    policy: str,
    topology: str,
) -> None:
    """The naive stack fails, naming the weights; the retrying one comes up."""
    repo = add_tiny_model(hub_cache, REPO, tmp_path)
    startup_case.apply(repo, SINGLE_WEIGHTS)
    startup_case.check(launch_stack(server_fleet, policy, topology))


@pytest.mark.startup_races(transient=["pointer_swap"])
@pytest.mark.parametrize("policy", ["naive", "retry"])
def test_one_shard_of_two_raced(
    startup_case: StartupCase,
    hub_cache: FakeHubCache,
    server_fleet: ServerFleet,
    tmp_path: Path,
    policy: str,
) -> None:
    """The same with sharded weights, the second shard raced: the read of the first shard
    before it meets nothing; the second's meets the change."""
    repo = add_tiny_model(hub_cache, REPO, tmp_path, sharded=True)
    startup_case.apply(repo, SHARDS[1])
    startup_case.check(launch_stack(server_fleet, policy, "single", sharded=True))
