"""A race of your own (``own_races.py``, registered in ``conftest.py``) and the in-process
verdicts ``assert_survives`` / ``assert_fails_closed``.

    pytest -p startup_guard examples/test_own_race.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from own_races import SnapshotResync

from pytest_startup_guard import FakeHubCache, HubRace, assert_fails_closed, assert_survives
from pytest_startup_guard.races.triggers import on_access


def load(repo_id: str = "acme/tiny") -> dict[str, object]:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(repo_id).to_dict()


def load_with_retry() -> dict[str, object]:
    import random
    import time

    for attempt in range(6):
        try:
            return load()
        except Exception:
            if attempt == 5:
                raise
            time.sleep(0.05 * 2**attempt * random.uniform(0.5, 1.5))
    raise AssertionError("unreachable")


@pytest.fixture
def repo_path(hub_cache: FakeHubCache) -> Path:
    return hub_cache.add_model(
        "acme/tiny", {"config.json": {"model_type": "gpt2", "n_layer": 3}}
    ).path


def test_retry_survives_a_snapshot_resync(
    hub_cache: FakeHubCache, hub_race: HubRace, repo_path: Path
) -> None:
    repo = hub_cache.repo("acme/tiny")
    armed = hub_race.arm("snapshot_resync", repo, "config.json", trigger=on_access(hold=0.3))
    assert_survives(load_with_retry, armed, expect=lambda config: config["n_layer"] == 3)  # type: ignore[index]


def test_a_loader_without_retry_does_not(
    hub_cache: FakeHubCache, hub_race: HubRace, repo_path: Path
) -> None:
    repo = hub_cache.repo("acme/tiny")
    hub_race.arm(SnapshotResync(), repo, "config.json")
    with pytest.raises(AssertionError, match="did not survive"):
        assert_survives(load)


def test_retry_still_fails_closed_on_a_corrupt_config(
    hub_cache: FakeHubCache, repo_path: Path
) -> None:
    repo = hub_cache.repo("acme/tiny")
    hub_cache.corrupt(repo, "config.json", "truncated")
    assert_fails_closed(load_with_retry, within=10, match="not a valid JSON file")
