"""Nothing is written outside the plugin's own caches: HOME, HF_HOME and XDG stay untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

INNER_SUITE = """
import json, os, subprocess, sys

CONFIG = {"config.json": {"model_type": "gpt2"}}

def test_in_process(hub_cache):
    from transformers import AutoConfig
    from huggingface_hub import snapshot_download
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    assert AutoConfig.from_pretrained("acme/tiny").model_type == "gpt2"
    snapshot_download("acme/tiny")
    hub_cache.corrupt(repo, "config.json", "empty")

def test_in_a_child(hub_cache):
    hub_cache.add_model("acme/tiny", CONFIG)
    code = "from transformers import AutoConfig; print(AutoConfig.from_pretrained('acme/tiny').model_type)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **hub_cache.env},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("gpt2")

def test_shared_and_copies(shared_hub_cache, hub_cache):
    repo = shared_hub_cache.add_model("acme/shared", CONFIG)
    copy = hub_cache.copy_of(repo)
    hub_cache.corrupt(copy, "config.json", "truncated")
"""


def _snapshot(root: Path) -> list[tuple[str, int, float]]:
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            stat = path.lstat()
            entries.append((str(path.relative_to(root)), stat.st_size, stat.st_mtime))
    return sorted(entries)


def test_inner_session_leaves_home_and_hf_home_untouched(
    guard_pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    sentinels = tmp_path_factory.mktemp("sentinels")
    for name in ("home", "hf_home", "xdg_cache"):
        (sentinels / name).mkdir()
        (sentinels / name / "SENTINEL").write_text(name)
    before = _snapshot(sentinels)
    monkeypatch.setenv("HOME", str(sentinels / "home"))
    monkeypatch.setenv("HF_HOME", str(sentinels / "hf_home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(sentinels / "xdg_cache"))
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    guard_pytester.makepyfile(INNER_SUITE)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert _snapshot(sentinels) == before
