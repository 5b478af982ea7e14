"""The fake cache against the real huggingface_hub and transformers, in-process and in a child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_startup_guard import CORRUPTIONS

FILES = {
    "config.json": {"model_type": "gpt2", "n_layer": 2, "vocab_size": 64},
    "tokenizer_config.json": {"model_max_length": 128},
    "nested/dir/notes.txt": "nested file\n",
    "model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
}

# What the real loaders raise on each corruption: transformers 5.24's messages (docs/cache.md,
# Corruptions), checked here against the versions installed.
EXPECTED_FAILURE = {
    "empty": (OSError, "is not a valid JSON file"),
    "truncated": (OSError, "is not a valid JSON file"),
    "not_json": (OSError, "is not a valid JSON file"),
    "binary": (OSError, "is not a valid JSON file"),
    "no_model_type": (ValueError, "Unrecognized model in acme/tiny"),
    "no_exist": (ValueError, "Unrecognized model in acme/tiny"),
    "dangling_pointer": (OSError, "We couldn't connect to"),
    "missing_pointer": (OSError, "We couldn't connect to"),
    "missing_blob": (OSError, "We couldn't connect to"),
    "empty_ref": (OSError, "We couldn't connect to"),
}


def test_every_corruption_has_an_expected_failure() -> None:
    assert set(EXPECTED_FAILURE) == set(CORRUPTIONS)


def test_huggingface_hub_resolves_every_file_in_process(hub_cache: object) -> None:
    from huggingface_hub import hf_hub_download, snapshot_download, try_to_load_from_cache

    from pytest_startup_guard import FakeHubCache

    assert isinstance(hub_cache, FakeHubCache)
    repo = hub_cache.add_model("acme/tiny", FILES)
    for name in FILES:
        expected = str(repo.pointer(name))
        assert try_to_load_from_cache("acme/tiny", name) == expected
        assert hf_hub_download("acme/tiny", name, local_files_only=True) == expected
    snapshot = Path(snapshot_download("acme/tiny", local_files_only=True))
    assert snapshot == repo.path / "snapshots" / repo.commit
    assert json.loads((snapshot / "config.json").read_text())["n_layer"] == 2
    assert (snapshot / "nested/dir/notes.txt").read_text() == "nested file\n"


def test_revisions_and_no_exist_as_huggingface_hub_reads_them(hub_cache: object) -> None:
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.file_download import _CACHED_NO_EXIST

    from pytest_startup_guard import FakeHubCache

    assert isinstance(hub_cache, FakeHubCache)
    main = hub_cache.add_model("acme/tiny", FILES, no_exist=["tokenizer.json"])
    v2 = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "llama"}}, revision="v2")
    assert try_to_load_from_cache("acme/tiny", "tokenizer.json") is _CACHED_NO_EXIST
    assert try_to_load_from_cache("acme/tiny", "config.json", revision="v2") == str(
        v2.pointer("config.json")
    )
    assert try_to_load_from_cache("acme/tiny", "config.json", revision=main.commit) == str(
        main.pointer("config.json")
    )
    assert try_to_load_from_cache("acme/other", "config.json") is None


def test_transformers_autoconfig_in_process(hub_cache: object) -> None:
    from transformers import AutoConfig

    from pytest_startup_guard import FakeHubCache

    assert isinstance(hub_cache, FakeHubCache)
    hub_cache.add_model("acme/tiny", FILES)
    hub_cache.add_model(
        "acme/tiny", {"config.json": {"model_type": "bert", "hidden_size": 32}}, revision="v2"
    )
    config = AutoConfig.from_pretrained("acme/tiny")
    assert (config.model_type, config.n_layer) == ("gpt2", 2)
    assert AutoConfig.from_pretrained("acme/tiny", revision="v2").model_type == "bert"


CHILD = textwrap.dedent(
    """
    import json, sys
    from huggingface_hub import hf_hub_download, snapshot_download, try_to_load_from_cache
    from transformers import AutoConfig
    names = json.loads(sys.argv[1])
    result = {
        "try": {n: try_to_load_from_cache("acme/tiny", n) for n in names},
        "download": {n: hf_hub_download("acme/tiny", n) for n in names},
        "snapshot": snapshot_download("acme/tiny"),
        "model_type": AutoConfig.from_pretrained("acme/tiny").model_type,
    }
    print(json.dumps(result))
    """
)


def test_child_process_resolves_every_file_with_env_only(hub_cache: object) -> None:
    from pytest_startup_guard import FakeHubCache

    assert isinstance(hub_cache, FakeHubCache)
    repo = hub_cache.add_model("acme/tiny", FILES)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_"))
    }
    env.update(hub_cache.env)
    output = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(list(FILES))],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    result = json.loads(output.strip().splitlines()[-1])
    for name in FILES:
        assert result["try"][name] == result["download"][name] == str(repo.pointer(name))
    assert result["snapshot"] == str(repo.path / "snapshots" / repo.commit)
    assert result["model_type"] == "gpt2"


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_each_corruption_fails_the_real_loader_as_facts_say(hub_cache: object, kind: str) -> None:
    from transformers import AutoConfig

    from pytest_startup_guard import FakeHubCache

    assert isinstance(hub_cache, FakeHubCache)
    repo = hub_cache.add_model("acme/tiny", FILES)
    AutoConfig.from_pretrained("acme/tiny")  # whole before
    hub_cache.corrupt(repo, "config.json", kind)
    exception, message = EXPECTED_FAILURE[kind]
    with pytest.raises(exception, match=message) as raised:
        AutoConfig.from_pretrained("acme/tiny")
    if message.startswith("We couldn't connect"):
        assert type(raised.value.__cause__).__name__ == "LocalEntryNotFoundError"


def test_constants_of_an_already_imported_hub_are_patched_and_restored(
    pytester: pytest.Pytester,
) -> None:
    """huggingface_hub imported before the fixture: its constants follow the fake cache, then
    come back; a module first imported during the test is put back too."""
    pytester.makepyfile(
        """
        import os
        import huggingface_hub.constants as constants

        ORIGINAL = (constants.HF_HUB_CACHE, constants.HF_HOME, constants.HF_HUB_OFFLINE)

        def test_inside(hub_cache):
            assert constants.HF_HUB_CACHE == str(hub_cache.hub_dir)
            assert constants.HF_HOME == str(hub_cache.root)
            assert constants.HF_HUB_OFFLINE is True
            assert os.environ["HF_HUB_CACHE"] == str(hub_cache.hub_dir)
            import transformers.utils.hub as thub  # first imported here
            assert thub.HF_MODULES_CACHE.startswith(str(hub_cache.root))

        def test_after():
            assert (constants.HF_HUB_CACHE, constants.HF_HOME, constants.HF_HUB_OFFLINE) == ORIGINAL
            import transformers.utils.hub as thub
            assert "startup-guard-cache" not in thub.HF_MODULES_CACHE
            assert "startup-guard-cache" not in os.environ.get("HF_HUB_CACHE", "")
        """
    )
    result = pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2)
