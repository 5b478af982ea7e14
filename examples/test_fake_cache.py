"""A fake Hugging Face cache the real libraries read offline, and what each corruption does.

Run: ``pytest -p startup_guard examples/test_fake_cache.py -v``
"""

from __future__ import annotations

import pytest

from pytest_startup_guard import CORRUPTIONS, FakeHubCache

CONFIG = {"config.json": {"model_type": "gpt2", "n_layer": 2}}


def test_transformers_reads_the_fake_cache_offline(hub_cache: FakeHubCache) -> None:
    from transformers import AutoConfig

    hub_cache.add_model("acme/tiny", CONFIG)
    assert AutoConfig.from_pretrained("acme/tiny").n_layer == 2


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupt_config_fails_closed(
    hub_cache: FakeHubCache, kind: str, record_property: pytest.RecordProperty
) -> None:
    from transformers import AutoConfig

    repo = hub_cache.add_model("acme/tiny", CONFIG)
    hub_cache.corrupt(repo, "config.json", kind)
    with pytest.raises(Exception) as caught:
        AutoConfig.from_pretrained("acme/tiny")
    first_line = str(caught.value).strip().splitlines()[0].replace(str(repo.path), "<repo>")
    record_property("caught", f"{type(caught.value).__name__}: {first_line}"[:120])
