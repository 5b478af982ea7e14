"""FakeHubCache: the layout huggingface_hub writes, corruptions, safety and copies."""

from __future__ import annotations

import hashlib
import json
import os
from fnmatch import fnmatch
from pathlib import Path

import pytest

from pytest_startup_guard import CORRUPTIONS, FakeHubCache, UnknownNameError, UnsafeCacheError
from pytest_startup_guard.cache.layout import git_blob_sha1

CONFIG = {"model_type": "gpt2", "n_layer": 2}


@pytest.fixture
def cache(tmp_path: Path) -> FakeHubCache:
    return FakeHubCache(tmp_path / "cache")


def test_layout_matches_huggingface_hub(cache: FakeHubCache) -> None:
    repo = cache.add_model(
        "acme/tiny",
        {"config.json": CONFIG, "sub/dir/notes.txt": "hello", "model.safetensors": b"\0" * 64},
        no_exist=["tokenizer.json"],
    )
    folder = cache.hub_dir / "models--acme--tiny"
    assert repo.path == folder
    assert (folder / "refs" / "main").read_bytes() == repo.commit.encode()  # no newline
    assert len(repo.commit) == 40 and int(repo.commit, 16) >= 0
    config_bytes = (json.dumps(CONFIG, indent=2, sort_keys=True) + "\n").encode()
    assert os.readlink(repo.pointer("config.json")) == f"../../blobs/{git_blob_sha1(config_bytes)}"
    assert (
        os.readlink(repo.pointer("sub/dir/notes.txt"))
        == f"../../../../blobs/{git_blob_sha1(b'hello')}"
    )
    assert repo.blob("model.safetensors").name == hashlib.sha256(b"\0" * 64).hexdigest()
    assert repo.pointer("config.json").read_bytes() == config_bytes
    assert (folder / ".no_exist" / repo.commit / "tokenizer.json").read_bytes() == b""
    assert (cache.hub_dir / ".locks" / "models--acme--tiny").is_dir()
    assert repo.lock("config.json").parent == cache.hub_dir / ".locks" / "models--acme--tiny"
    assert (
        git_blob_sha1(b"hello") == "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0"
    )  # `git hash-object`


def test_large_files_get_sha256_etags(tmp_path: Path) -> None:
    cache = FakeHubCache(tmp_path / "c", lfs_threshold=10)
    repo = cache.add_model("acme/big", {"vocab.txt": "x" * 11, "small.txt": "x" * 10})
    assert repo.blob("vocab.txt").name == hashlib.sha256(b"x" * 11).hexdigest()
    assert repo.blob("small.txt").name == git_blob_sha1(b"x" * 10)


def test_datasets_get_their_own_folder(cache: FakeHubCache) -> None:
    repo = cache.add_dataset("acme/data", {"train.jsonl": "{}\n"})
    assert repo.path.name == "datasets--acme--data"
    assert repo.pointer("train.jsonl").read_text() == "{}\n"


def test_commits_are_deterministic_and_revisions_share_blobs(tmp_path: Path) -> None:
    first = FakeHubCache(tmp_path / "a").add_model("acme/tiny", {"config.json": CONFIG})
    second = FakeHubCache(tmp_path / "b").add_model("acme/tiny", {"config.json": CONFIG})
    assert first.commit == second.commit
    v2 = first.cache.add_model(
        "acme/tiny", {"config.json": CONFIG, "extra.txt": "v2"}, revision="v2"
    )
    assert v2.commit != first.commit
    assert first.ref().read_text() == first.commit
    assert v2.ref().read_text() == v2.commit
    assert sorted(os.listdir(first.path / "snapshots")) == sorted([first.commit, v2.commit])
    assert len(os.listdir(first.path / "blobs")) == 2  # config.json stored once
    assert first.cache.repo("acme/tiny", "v2").files == v2.files


def test_adding_the_same_model_twice_is_idempotent(cache: FakeHubCache) -> None:
    first = cache.add_model("acme/tiny", {"config.json": CONFIG})
    inode = first.blob("config.json").stat().st_ino
    second = cache.add_model("acme/tiny", {"config.json": CONFIG})
    assert second.commit == first.commit
    assert second.blob("config.json").stat().st_ino == inode


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.add_model("acme--x/tiny", {"a": "b"}), "invalid repo id 'acme--x/tiny'*"),
        (lambda c: c.add_model("acme/tiny", {"../evil": "b"}), "invalid file name '../evil'*"),
        (lambda c: c.add_model("acme/tiny", {}), "invalid files for 'acme/tiny'*"),
        (lambda c: c.add_model("acme/tiny", {"a": "b"}, revision="a/b"), "invalid revision 'a/b'*"),
        (lambda c: c.add_model("acme/tiny", {"a": 3}), "invalid content for 'a': int*"),
    ],
)
def test_bad_input_is_named(cache: FakeHubCache, call: object, message: str) -> None:
    with pytest.raises((ValueError, TypeError)) as raised:
        call(cache)  # type: ignore[operator]
    assert fnmatch(str(raised.value), message), str(raised.value)


def test_refuses_a_root_it_did_not_create(tmp_path: Path) -> None:
    real = tmp_path / "real-cache"
    (real / "hub").mkdir(parents=True)
    with pytest.raises(UnsafeCacheError, match=r"has no \.startup_guard_cache marker"):
        FakeHubCache(real)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert FakeHubCache(empty).root == empty  # an empty folder is fine
    assert FakeHubCache(empty).hub_dir.is_dir()  # and can be reopened


def test_corrupt_refuses_a_cache_whose_marker_is_gone(cache: FakeHubCache) -> None:
    repo = cache.add_model("acme/tiny", {"config.json": CONFIG})
    (cache.root / ".startup_guard_cache").unlink()
    with pytest.raises(UnsafeCacheError, match="did not create it"):
        cache.corrupt(repo, "config.json", "empty")


def test_unknown_corruption_lists_the_known_ones(cache: FakeHubCache) -> None:
    repo = cache.add_model("acme/tiny", {"config.json": CONFIG})
    with pytest.raises(UnknownNameError) as raised:
        cache.corrupt(repo, "config.json", "emtpy")
    message = str(raised.value)
    assert "unknown corruption 'emtpy' in cache.corrupt() (did you mean 'empty'?)" in message
    for name in CORRUPTIONS:
        assert name in message


def test_unknown_file_lists_the_repo_files(cache: FakeHubCache) -> None:
    repo = cache.add_model("acme/tiny", {"config.json": CONFIG})
    with pytest.raises(KeyError, match=r"has no file 'tokenizer.json'; its files: config\.json"):
        cache.corrupt(repo, "tokenizer.json", "empty")


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_each_corruption_changes_the_disk_as_described(cache: FakeHubCache, kind: str) -> None:
    repo = cache.add_model("acme/tiny", {"config.json": CONFIG})
    pointer, blob, ref = repo.pointer("config.json"), repo.blob("config.json"), repo.ref()
    changed = cache.corrupt(repo, "config.json", kind)
    assert (
        changed.exists()
        or os.path.islink(changed)
        or kind in ("missing_pointer", "missing_blob", "no_exist")
    )
    readable = pointer.exists()
    if kind in ("empty", "truncated", "not_json", "binary", "no_model_type"):
        content = pointer.read_bytes()
        assert (
            readable and content != (json.dumps(CONFIG, indent=2, sort_keys=True) + "\n").encode()
        )
        if kind == "no_model_type":
            assert json.loads(content) == {"n_layer": 2}
    elif kind == "dangling_pointer":
        assert os.path.islink(pointer) and not readable and blob.exists()
    elif kind == "missing_pointer":
        assert not os.path.lexists(pointer) and blob.exists()
    elif kind == "missing_blob":
        assert os.path.islink(pointer) and not blob.exists()
    elif kind == "empty_ref":
        assert ref.read_bytes() == b""
    elif kind == "no_exist":
        assert not os.path.lexists(pointer) and repo.no_exist("config.json").is_file()


def test_copy_of_hard_links_blobs_and_copy_on_write_protects_the_original(tmp_path: Path) -> None:
    shared = FakeHubCache(tmp_path / "shared", shared=True)
    original = shared.add_model("acme/tiny", {"config.json": CONFIG, "w.safetensors": b"1" * 32})
    private = FakeHubCache(tmp_path / "private")
    copy = private.copy_of(original)
    assert copy.commit == original.commit and copy.path != original.path
    assert copy.blob("config.json").stat().st_ino == original.blob("config.json").stat().st_ino
    assert os.readlink(copy.pointer("config.json")) == os.readlink(original.pointer("config.json"))
    assert copy.ref().stat().st_ino != original.ref().stat().st_ino
    before = original.pointer("config.json").read_bytes()
    for kind in ("empty", "empty_ref"):
        private.corrupt(copy, "config.json", kind)
    assert original.pointer("config.json").read_bytes() == before
    assert original.ref().read_text() == original.commit
    assert copy.pointer("config.json").read_bytes() == b""


def test_clone_copies_every_repo_and_keeps_writes_to_itself(tmp_path: Path) -> None:
    """What a parallel exploration gives each member: every repo of the cache, each revision,
    blobs hard-linked; a race or corruption of the clone never reaches the source."""
    shared = FakeHubCache(tmp_path / "shared", shared=True)
    model = shared.add_model("acme/tiny", {"config.json": CONFIG}, no_exist=["tokenizer.json"])
    v2 = shared.add_model("acme/tiny", {"config.json": {**CONFIG, "n_layer": 2}}, revision="v2")
    dataset = shared.add_dataset("acme/data", {"rows.json": [1, 2]})
    clone = shared.clone(tmp_path / "clone")
    assert not clone.shared and clone.root == (tmp_path / "clone").absolute()
    tiny = clone.repo("acme/tiny")
    assert tiny.commit == model.commit and tiny.path != model.path
    assert json.loads(tiny.pointer("config.json").read_text()) == CONFIG
    cloned_v2 = clone.repo("acme/tiny", "v2")
    assert cloned_v2.ref().read_text() == v2.ref().read_text()
    assert json.loads(cloned_v2.pointer("config.json").read_text())["n_layer"] == 2
    assert clone.repo("acme/data", repo_type="dataset").commit == dataset.commit
    assert tiny.no_exist("tokenizer.json").is_file()
    assert tiny.blob("config.json").stat().st_ino == model.blob("config.json").stat().st_ino
    clone.corrupt(tiny, "config.json", "empty")
    assert json.loads(model.pointer("config.json").read_text()) == CONFIG
    with pytest.raises(UnsafeCacheError, match="refusing to use"):
        shared.clone(tmp_path / "shared" / "hub")  # not new, not empty, not ours


def test_shared_repos_refuse_corruption_and_name_copy_of(tmp_path: Path) -> None:
    shared = FakeHubCache(tmp_path / "shared", shared=True)
    repo = shared.add_model("acme/tiny", {"config.json": CONFIG})
    private = FakeHubCache(tmp_path / "private")
    with pytest.raises(UnsafeCacheError, match=r"shared_hub_cache.*hub_cache.copy_of\(repo\)"):
        private.corrupt(repo, "config.json", "empty")
    with pytest.raises(UnsafeCacheError, match="copy_of"):
        shared.corrupt(repo, "config.json", "empty")
    assert repo.pointer("config.json").read_bytes().startswith(b"{")


def test_env_points_every_hub_variable_into_the_root(cache: FakeHubCache) -> None:
    env = cache.env
    assert env["HF_HUB_CACHE"] == str(cache.hub_dir)
    assert env["HF_HOME"] == str(cache.root)
    assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["HF_HUB_DISABLE_TELEMETRY"] == "1"
    for key, value in env.items():
        if value.startswith("/"):
            assert value.startswith(str(cache.root)), key


def test_listing_shows_links_and_sizes(cache: FakeHubCache) -> None:
    repo = cache.add_model("acme/tiny", {"config.json": CONFIG})
    entries = {entry["path"]: entry for entry in cache.listing()}
    pointer = entries[str(repo.pointer("config.json").relative_to(cache.hub_dir))]
    assert pointer["kind"] == "link" and pointer["target"].startswith("../../blobs/")
    assert pointer["size"] == repo.blob("config.json").stat().st_size
