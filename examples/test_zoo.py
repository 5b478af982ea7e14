"""The bug zoo: four ways a server can load its config at start-up, each raced and corrupted.

    pytest -p startup_guard examples/test_zoo.py

Every test here is one server policy under one case. A case *passes* when its verdict holds —
the servers survived a transient race (and it hit each of them), or they failed closed on a
corrupt config. ``zoo.EXPECTED`` says which policies are supposed to pass which cases: the
naive server fails the transient ones, swallow and slow_retry fail the corrupt ones.
"""

from __future__ import annotations

import json
import os

import pytest
from zoo import CONFIG, LOADERS, POLICIES, command

from pytest_startup_guard import CachedRepo, FakeHubCache, ServerFleet, StartupCase, ready

SERVERS = int(os.environ.get("ZOO_SERVERS", "2"))
TIMEOUT = float(os.environ.get("ZOO_TIMEOUT", "8"))


def serves_the_real_config(body: str) -> bool:
    return json.loads(body).get("n_layer") == 3


@pytest.mark.startup_races(transient="all", corrupt="all")
@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("policy", POLICIES)
def test_startup(
    startup_case: StartupCase,
    hub_cache: FakeHubCache,
    server_fleet: ServerFleet,
    policy: str,
    loader: str,
) -> None:
    repo: CachedRepo = hub_cache.add_model("acme/tiny", CONFIG)
    startup_case.apply(repo, "config.json")
    fleet = server_fleet.launch(
        command(policy, loader),
        count=SERVERS,
        ready=ready.http("/config", expect=serves_the_real_config),
        timeout=TIMEOUT,
    )
    startup_case.check(fleet)
