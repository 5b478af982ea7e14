"""Every access point of the example server's start-up raced, one point per run.

    pytest -p startup_guard examples/test_explore.py

``server_fleet.explore`` finds the access points of a clean start-up (each process's nth access
of the repo) and races ``config.json`` at each: the server without retry dies at every one of
them, the one with the incident's fix survives them all. ``explore=True`` on the
``startup_races`` marker does the same to a usual race test, unchanged.
"""

from __future__ import annotations

import pytest
from zoo import CONFIG, command

from pytest_startup_guard import FakeHubCache, ServerFleet, StartupCase, ready


@pytest.mark.parametrize("policy", ["naive", "retry"])
def test_every_access_point(
    hub_cache: FakeHubCache,
    server_fleet: ServerFleet,
    policy: str,
    record_property: pytest.RecordProperty,
) -> None:
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    exploration = server_fleet.explore(
        command(policy, "autoconfig"),
        "pointer_swap",
        repo,
        "config.json",
        count=4,
        ready=ready.http("/health"),
    )
    record_property(
        "caught",
        f"{len(exploration.points)} points in {exploration.launches} launch(es): "
        + ", ".join(
            f"#{p.point.number} {p.point.op} {p.point.path.rsplit('/', 1)[-1]}: {p.outcome}"
            for p in exploration.points
        ),
    )
    if policy == "naive":  # no retry: the race kills it wherever it falls
        assert exploration.points and exploration.failed == exploration.points
    else:
        exploration.assert_all_survived()


@pytest.mark.startup_races(transient=["pointer_swap", "ref_rewrite"], explore=True)
def test_retry_survives_every_access_point(
    startup_case: StartupCase, hub_cache: FakeHubCache, server_fleet: ServerFleet
) -> None:
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    startup_case.apply(repo, "config.json")
    startup_case.check(
        server_fleet.launch(command("retry", "autoconfig"), count=4, ready=ready.http("/health"))
    )
