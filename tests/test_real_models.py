"""Real models in the fake cache: ``add_from_folder`` and ``add_from_cache``, with real libraries.

A tiny model is made here as users make one (a ``tokenizers`` tokenizer saved through
transformers, a ``GPT2Config``, weights written with ``safetensors.numpy``), then added from its
folder and from a hub cache laid out as huggingface_hub writes one. Real servers load it
(``examples/servers/model_server.py``: transformers and safetensors, no torch) while races hit
its ``tokenizer.json`` and ``model.safetensors``; no race and no corruption ever changes a byte,
a modification time or a name of the source.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODEL_SERVER = ROOT / "examples" / "servers" / "model_server.py"

# The hand-made source cache: two revisions, as a download of main and of a tag leaves them.
COMMIT = "1f0c3e5a9b7d2c4e6f8a0b1c3d5e7f9a1b2c3d4e"
OLD_COMMIT = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
LFS_SUFFIXES = (".safetensors",)

COMMON = f"""
import json, os, sys
from pathlib import Path
import pytest
from pytest_startup_guard import CORRUPTIONS, ready

FOLDER = Path(os.environ["REAL_MODEL_FOLDER"])
SOURCE_HUB = Path(os.environ["REAL_MODEL_HUB"])
COMMIT = {COMMIT!r}
SERVER = [sys.executable, {str(MODEL_SERVER)!r}, "--model", "acme/real", "--port", "{{port}}"]
TENSORS = {{"wte": [4, 8]}}

def add(cache, source, repo_id="acme/real"):
    if source == "folder":
        return cache.add_from_folder(repo_id, FOLDER)
    return cache.add_from_cache(repo_id, SOURCE_HUB)

def source_file(source, name):
    '''The source file a repo's file was linked (or copied) from.'''
    if source == "folder":
        return FOLDER / name
    return (SOURCE_HUB / "models--acme--real" / "snapshots" / COMMIT / name).resolve()

def loaded_the_model(body):
    return json.loads(body)["tensors"] == TENSORS
"""


def make_tiny_model(folder: Path) -> None:
    """A model folder as ``save_pretrained`` writes it, plus a nested file and git's data."""
    import numpy as np
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "tiny": 3}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(folder)
    GPT2Config(
        n_layer=1, n_head=2, n_embd=8, n_positions=16, vocab_size=4, bos_token_id=0, eos_token_id=0
    ).save_pretrained(folder)
    weights = {"wte": np.arange(32, dtype=np.float32).reshape(4, 8)}
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "nested" / "dir").mkdir(parents=True)
    (folder / "nested" / "dir" / "notes.txt").write_text("a nested file\n")
    (folder / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    (folder / ".git" / "objects").mkdir(parents=True)  # a checkout's own data: skipped
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")


def hub_etag(name: str, data: bytes) -> str:
    """The etag the hub gives a file: sha256 for LFS files, the git blob sha1 otherwise."""
    if name.endswith(LFS_SUFFIXES):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_snapshot(folder: Path, commit: str, files: dict[str, bytes], ref: str) -> None:
    """One revision as huggingface_hub downloads it: blobs named by their etag, a snapshot of
    relative symlinks, ``refs/<ref>`` holding the commit without a newline."""
    for name, data in files.items():
        blob = folder / "blobs" / hub_etag(name, data)
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        pointer = folder / "snapshots" / commit / name
        pointer.parent.mkdir(parents=True, exist_ok=True)
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / ref).write_text(commit)
    (folder.parent / ".locks" / folder.name).mkdir(parents=True, exist_ok=True)


def write_source_cache(hub: Path, model: Path) -> Path:
    """A user's hub cache: ``acme/real`` at ``main`` (every file of ``model`` but git's, and a
    ``.no_exist`` entry) and ``v1`` (its config only), and a dataset beside it."""
    folder = hub / "models--acme--real"
    files = {
        path.relative_to(model).as_posix(): path.read_bytes()
        for path in sorted(model.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(model).parts
    }
    write_snapshot(folder, COMMIT, files, "main")
    write_snapshot(folder, OLD_COMMIT, {"config.json": files["config.json"]}, "v1")
    (folder / ".no_exist" / COMMIT).mkdir(parents=True)
    (folder / ".no_exist" / COMMIT / "generation_config.json").write_bytes(b"")
    write_snapshot(hub / "datasets--acme--corpus", "9" * 40, {"train.jsonl": b"{}\n"}, "main")
    return folder


@pytest.fixture(scope="session")
def tiny_model_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-model")
    make_tiny_model(folder)
    return folder


@pytest.fixture
def real_model(
    guard_pytester: pytest.Pytester,
    tiny_model_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> pytest.Pytester:
    """A pytester whose inner tests find a model folder and a source hub cache of their own."""
    sources = tmp_path_factory.mktemp("sources")
    folder = sources / "tiny-model"
    shutil.copytree(tiny_model_template, folder)
    write_source_cache(sources / "hf-home" / "hub", folder)
    monkeypatch.setenv("REAL_MODEL_FOLDER", str(folder))
    monkeypatch.setenv("REAL_MODEL_HUB", str(sources / "hf-home" / "hub"))
    guard_pytester.makepyfile(common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


def source_paths() -> tuple[Path, Path]:
    return Path(os.environ["REAL_MODEL_FOLDER"]), Path(os.environ["REAL_MODEL_HUB"])


def fingerprint(root: Path) -> dict[str, tuple[object, ...]]:
    """Every name under ``root`` with its kind, bytes, size, mode and modification time."""
    entries: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            status = path.lstat()
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                entries[relative] = ("link", os.readlink(path), status.st_mtime_ns)
            elif path.is_dir():
                entries[relative] = ("dir", sorted(os.listdir(path)), status.st_mtime_ns)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                entries[relative] = (
                    "file",
                    digest,
                    status.st_size,
                    status.st_mode,
                    status.st_mtime_ns,
                )
    return entries


def test_the_hand_made_source_cache_is_one_huggingface_hub_reads(tmp_path: Path) -> None:
    """The source cache of these tests is no approximation: huggingface_hub scans it whole."""
    from huggingface_hub import scan_cache_dir

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "gpt2"}')
    (model / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    write_source_cache(tmp_path / "hub", model)
    report = scan_cache_dir(tmp_path / "hub")
    assert not report.warnings, report.warnings
    (repo,) = [repo for repo in report.repos if repo.repo_id == "acme/real"]
    revisions = {revision.commit_hash: revision for revision in repo.revisions}
    assert set(revisions) == {COMMIT, OLD_COMMIT}
    assert revisions[COMMIT].refs == frozenset({"main"})
    assert {file.file_name for file in revisions[COMMIT].files} == {
        "config.json",
        "model.safetensors",
    }


def test_both_sources_load_with_the_real_libraries_in_process(real_model: pytest.Pytester) -> None:
    real_model.makepyfile(
        """
        from common import *

        @pytest.mark.parametrize("source", ["folder", "cache"])
        def test_load(hub_cache, source):
            from huggingface_hub import hf_hub_download, try_to_load_from_cache
            from safetensors.numpy import load_file
            from transformers import AutoConfig, AutoTokenizer

            repo = add(hub_cache, source)
            assert AutoConfig.from_pretrained("acme/real").n_embd == 8
            tokenizer = AutoTokenizer.from_pretrained("acme/real")
            assert tokenizer("hello world tiny")["input_ids"] == [1, 2, 3]
            weights = load_file(hf_hub_download("acme/real", "model.safetensors"))
            assert weights["wte"].shape == (4, 8) and float(weights["wte"][3, 7]) == 31.0
            assert try_to_load_from_cache("acme/real", "nested/dir/notes.txt") == str(
                repo.pointer("nested/dir/notes.txt")
            )
            assert ".gitattributes" in repo.files
            assert not any(name.startswith(".git/") for name in repo.files)
            for name in repo.files:
                # the real layout: relative pointers, blobs hard-linked to the source
                assert not os.path.isabs(os.readlink(repo.pointer(name)))
                assert os.readlink(repo.pointer(name)).endswith("blobs/" + repo.files[name])
                assert repo.blob(name).stat().st_ino == source_file(source, name).stat().st_ino
            assert repo.ref().read_text() == repo.commit
            listed = {entry["path"]: entry for entry in hub_cache.listing()}
            pointer = listed[str(repo.pointer("model.safetensors").relative_to(hub_cache.hub_dir))]
            assert pointer["kind"] == "link" and pointer["size"] == repo.blob("model.safetensors").stat().st_size
        """
    )
    real_model.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=2)


def test_add_from_folder_hashes_as_the_hub_and_derives_the_commit(
    real_model: pytest.Pytester,
) -> None:
    real_model.makepyfile(
        """
        from common import *
        from pytest_startup_guard.cache.layout import etag_for

        def test_folder(hub_cache, tmp_path):
            repo = hub_cache.add_from_folder("acme/real", FOLDER)
            files = {
                path.relative_to(FOLDER).as_posix(): path.read_bytes()
                for path in FOLDER.rglob("*")
                if path.is_file() and ".git" not in path.relative_to(FOLDER).parts
            }
            assert set(repo.files) == set(files)
            assert dict(repo.files) == {name: etag_for(name, data) for name, data in files.items()}
            # the same files through add_model: the same commit, in any cache
            assert hub_cache.add_model("acme/real", files).commit == repo.commit
            assert hub_cache.add_from_folder("acme/real", FOLDER).commit == repo.commit  # again
            v2 = hub_cache.add_from_folder("acme/real", FOLDER / "nested", revision="v2")
            assert set(v2.files) == {"dir/notes.txt"} and v2.ref().read_text() == v2.commit
            dataset = hub_cache.add_from_folder("acme/real", FOLDER, repo_type="dataset")
            assert dataset.path.name == "datasets--acme--real"
            # symlinks in the folder (a snapshot of a cache) are followed to their files
            snapshot = SOURCE_HUB / "models--acme--real" / "snapshots" / COMMIT
            linked = hub_cache.add_from_folder("acme/snap", snapshot)
            assert linked.files["model.safetensors"] == repo.files["model.safetensors"]
        """
    )
    real_model.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


def test_add_from_cache_keeps_the_commit_refs_and_no_exist(real_model: pytest.Pytester) -> None:
    real_model.makepyfile(
        """
        from common import *
        from pytest_startup_guard import FakeHubCache
        OLD_COMMIT = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"

        def test_cache(hub_cache, tmp_path):
            from huggingface_hub import try_to_load_from_cache
            from huggingface_hub.file_download import _CACHED_NO_EXIST

            main = hub_cache.add_from_cache("acme/real", SOURCE_HUB)
            assert (main.commit, main.revision) == (COMMIT, "main")
            assert main.ref().stat().st_ino != (SOURCE_HUB / "models--acme--real/refs/main").stat().st_ino
            assert try_to_load_from_cache("acme/real", "generation_config.json") is _CACHED_NO_EXIST
            v1 = hub_cache.add_from_cache("acme/real", SOURCE_HUB, revision="v1")
            assert (v1.commit, v1.revision, set(v1.files)) == (OLD_COMMIT, "v1", {"config.json"})
            assert main.ref().read_text() == COMMIT  # the other revision is still there
            assert try_to_load_from_cache("acme/real", "config.json", revision="v1") == str(
                v1.pointer("config.json")
            )
            # a commit: its snapshot, named by the fake repo's refs/main
            other = FakeHubCache(tmp_path / "other")
            pinned = other.add_from_cache("acme/real", SOURCE_HUB, revision=OLD_COMMIT)
            assert (pinned.commit, pinned.revision) == (OLD_COMMIT, "main")
            assert pinned.ref().read_text() == OLD_COMMIT
            # a fake cache is a hub cache too
            built = other.add_model("acme/built", {"config.json": {"model_type": "bert"}})
            copied = hub_cache.add_from_cache("acme/built", other.hub_dir)
            assert (copied.commit, dict(copied.files)) == (built.commit, dict(built.files))
        """
    )
    real_model.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


@pytest.mark.parametrize("source", ["folder", "cache"])
def test_a_fleet_loads_the_model_and_only_retry_survives_races_on_it(
    real_model: pytest.Pytester, source: str
) -> None:
    """Two model servers per fleet; pointer_swap on the tokenizer or the weights hits each.

    The window closes once each server made 50 more accesses of the cache, not after a time:
    a whole load makes 34 here (transformers 5.24, huggingface_hub 2.4: the weights' lookup is
    the 34th), so the first load of every server meets the fault however busy the machine is,
    and a retry gets through within its next attempts."""
    real_model.makepyfile(
        f"""
        from common import *
        from pytest_startup_guard import on_access

        @pytest.mark.parametrize("filename", ["tokenizer.json", "model.safetensors"])
        @pytest.mark.parametrize("policy", ["retry", "naive"])
        def test_fleet(hub_cache, hub_race, server_fleet, policy, filename):
            repo = add(hub_cache, {source!r})
            armed = hub_race.arm("pointer_swap", repo, filename, trigger=on_access(accesses=50))
            fleet = server_fleet.launch(
                SERVER + ["--policy", policy],
                count=2,
                ready=ready.http("/config", expect=loaded_the_model),
            )
            if policy == "retry":
                fleet.assert_all_ready()
                assert "retrying" in "".join(server.output for server in fleet.servers)
            else:
                fleet.assert_all_failed(match="server failed to start: could not load the model")
            assert all(server.hits for server in fleet.servers), fleet.summary()
            assert armed.hits
        """
    )
    result = real_model.runpytest_subprocess("-p", "startup_guard", "-rA")
    result.assert_outcomes(passed=4)


def test_the_default_trigger_reaches_the_file_raced_and_only_its_accesses_are_hits(
    real_model: pytest.Pytester,
) -> None:
    """A naive server that loads its config, then its tokenizer, then its weights (read in Rust
    by safetensors) must fail a pointer_swap on the weights with the default trigger, and a
    retrying one survive it: each process's window opens at its own first access of the raced
    pointer (a look: huggingface_hub decides with os.path.isfile), however late in its start-up.
    (Not the tokenizer: transformers goes on without a tokenizer.json it did not find, so a naive
    server meets that race and may still come up.) A hit is an access of the raced pointer,
    never one of config.json. A window placed by hand before the weights are read meets nothing,
    and no hit is claimed for it; a case raced that way is not green."""
    real_model.makepyfile(
        """
        from common import *
        from pytest_startup_guard import on_access

        def two_servers(server_fleet, policy):
            return server_fleet.launch(
                SERVER + ["--policy", policy],
                count=2,
                ready=ready.http("/config", expect=loaded_the_model),
            )

        @pytest.mark.parametrize("policy", ["retry", "naive"])
        def test_fleet(hub_cache, hub_race, server_fleet, policy):
            repo = add(hub_cache, "folder")
            filename = "model.safetensors"
            armed = hub_race.arm("pointer_swap", repo, filename)
            fleet = two_servers(server_fleet, policy)
            if policy == "retry":
                fleet.assert_all_ready()
            else:
                fleet.assert_all_failed(match="server failed to start: could not load the model")
            assert {hit.pid for hit in armed.hits} >= {s.pid for s in fleet.servers}, fleet.summary()
            assert armed.hits and all(
                hit.path == str(repo.pointer(filename)) for hit in armed.hits
            ), armed.hits

        def test_a_window_before_the_weights_meets_nothing(hub_cache, hub_race, server_fleet):
            repo = add(hub_cache, "folder")
            armed = hub_race.arm(
                "pointer_swap", repo, "model.safetensors",
                trigger=on_access(nth=1, hold=0.001), allow_miss=True,
            )
            fleet = two_servers(server_fleet, "naive")
            fleet.assert_all_ready()
            assert armed.windows and not armed.hits, armed.hits

        @pytest.mark.startup_races(transient=["pointer_swap"], trigger=on_access(nth=1, hold=0.001))
        def test_case_placed_before_the_weights(startup_case, hub_cache, server_fleet):
            repo = add(hub_cache, "folder")
            startup_case.apply(repo, "model.safetensors")
            fleet = two_servers(server_fleet, "naive")
            startup_case.check(fleet)
        """
    )
    result = real_model.runpytest_subprocess("-p", "startup_guard", "-rA")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*FAILED*test_case_placed_before_the_weights*",
            "*pid * (server 0) read model.safetensors at +* s, after the window closed at +* s:"
            " the race never hit it*",
        ]
    )


SENTINEL = """
from common import *

FILES = ["config.json", "tokenizer.json", "model.safetensors"]


def fake_state(repo):
    '''Every name in the fake repo with its inode, size and link target: what a fault changes.'''
    state = {}
    for dirpath, dirnames, filenames in os.walk(repo.path):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            status = path.lstat()
            target = os.readlink(path) if path.is_symlink() else None
            state[str(path.relative_to(repo.path))] = (status.st_ino, status.st_size, target)
    return state


def source_state(source):
    return {
        name: (source_file(source, name).read_bytes(), source_file(source, name).stat().st_mtime_ns)
        for name in FILES
    }


def fault_on_disk(race, repo, name):
    if race == "blob_rewrite":
        return repo.blob(name).stat().st_size == 0
    if race == "dangling_pointer":
        return os.path.islink(repo.pointer(name)) and not repo.blob(name).exists()
    if race == "ref_rewrite":
        return repo.ref().read_bytes() == b""
    return not os.path.lexists(repo.pointer(name))  # pointer_swap


@pytest.mark.parametrize("source", ["folder", "cache"])
@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("race", ["blob_rewrite", "dangling_pointer", "ref_rewrite", "pointer_swap"])
def test_race(hub_cache, hub_race, source, name, race):
    before = source_state(source)
    repo = add(hub_cache, source)
    assert repo.blob(name).stat().st_ino == source_file(source, name).stat().st_ino  # linked
    armed = hub_race.arm(race, repo, name)
    # The test process's read of what the race changes opens the window (before it proceeds;
    # a read, since a look meets no rewrite in place). A removed pointer fails the read.
    try:
        open(armed.race.raced_files(armed.target)[0], "rb").close()
    except OSError:
        pass
    assert armed.hits and fault_on_disk(race, repo, name)
    assert source_state(source) == before  # with the fault on disk
    armed.disarm()
    assert repo.pointer(name).read_bytes() == source_file(source, name).read_bytes()  # whole
    assert source_state(source) == before


@pytest.mark.parametrize("source", ["folder", "cache"])
@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corruption(hub_cache, source, name, kind):
    if kind == "no_model_type" and name == "model.safetensors":
        pytest.skip("no_model_type needs a JSON object")
    before = source_state(source)
    repo = add(hub_cache, source)
    assert repo.blob(name).stat().st_ino == source_file(source, name).stat().st_ino  # linked
    whole = fake_state(repo)
    hub_cache.corrupt(repo, name, kind)
    assert fake_state(repo) != whole  # the fault is in the fake repo ...
    assert source_state(source) == before  # ... and only there
    if CORRUPTIONS[kind].changes == "blob" and repo.blob(name).exists():
        assert repo.blob(name).stat().st_mode & 0o200  # its own copy, writable (source: 0444)


@pytest.mark.parametrize("source", ["folder", "cache"])
def test_copy_of_a_shared_repo(shared_hub_cache, hub_cache, source):
    before = source_state(source)
    shared = add(shared_hub_cache, source)
    mine = hub_cache.copy_of(shared)
    for name in FILES:
        assert mine.blob(name).stat().st_ino == shared.blob(name).stat().st_ino  # linked
        hub_cache.corrupt(mine, name, "truncated")
        assert mine.pointer(name).read_bytes() != shared.pointer(name).read_bytes()
        assert shared.pointer(name).read_bytes() == source_file(source, name).read_bytes()
    assert source_state(source) == before
"""


def test_no_race_and_no_corruption_ever_changes_the_source(real_model: pytest.Pytester) -> None:
    """Read-only sources (mode 0444, as a shared cache may be) stay byte for byte, mode and
    modification time as they were, names included, through every corruption and race."""
    folder, hub = source_paths()
    for root in (folder, hub):
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                path.chmod(0o444)
    before = {"folder": fingerprint(folder), "hub": fingerprint(hub)}
    real_model.makepyfile(SENTINEL)
    result = real_model.runpytest_subprocess("-p", "startup_guard", "-q")
    result.assert_outcomes(passed=4 * 3 * 2 + 10 * 3 * 2 - 2 + 2, skipped=2)
    assert {"folder": fingerprint(folder), "hub": fingerprint(hub)} == before


@pytest.fixture
def sources(tmp_path: Path, tiny_model_template: Path) -> tuple[Path, Path]:
    """A model folder and a hub cache holding it, for calls in this process."""
    folder = tmp_path / "tiny-model"
    shutil.copytree(tiny_model_template, folder)
    hub = tmp_path / "hf-home" / "hub"
    write_source_cache(hub, folder)
    return folder, hub


def source_error(call: Callable[[], object]) -> str:
    from pytest_startup_guard import StartupGuardError
    from pytest_startup_guard.cache.sources import RepoSourceError

    with pytest.raises(RepoSourceError) as raised:
        call()
    assert isinstance(raised.value, StartupGuardError)
    return str(raised.value)


def test_a_folder_that_is_missing_empty_or_partial_is_named(
    tmp_path: Path, sources: tuple[Path, Path]
) -> None:
    from pytest_startup_guard import FakeHubCache

    cache = FakeHubCache(tmp_path / "cache")
    missing = tmp_path / "no-such-model"
    message = source_error(lambda: cache.add_from_folder("acme/real", missing))
    assert (
        f"source folder {str(missing)!r} in add_from_folder('acme/real', ...) does not exist"
        in message
    )
    assert "expected a folder of the repo's files" in message
    message = source_error(lambda: cache.add_from_folder("acme/real", sources[0] / "config.json"))
    assert "config.json' in add_from_folder('acme/real', ...) is not a folder" in message

    only_git = tmp_path / "only-git"
    (only_git / ".git").mkdir(parents=True)
    (only_git / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    message = source_error(lambda: cache.add_from_folder("acme/real", only_git))
    where = "in add_from_folder('acme/real', ...)"
    assert f"source folder {str(only_git)!r} {where} has no files" in message
    assert "(skipped: .git, .cache/huggingface)" in message

    dangling = tmp_path / "dangling"
    shutil.copytree(sources[0], dangling)
    (dangling / "model.safetensors").unlink()
    (dangling / "model.safetensors").symlink_to("../blobs/gone")
    message = source_error(lambda: cache.add_from_folder("acme/real", dangling))
    assert (
        "'model.safetensors' of the source folder in add_from_folder('acme/real', ...) is"
        f" missing: {dangling / 'model.safetensors'} is a symlink to '../blobs/gone', which"
        " does not exist" in message
    )

    local_dir = tmp_path / "local-dir"  # hf download --local-dir, cut short
    shutil.copytree(sources[0], local_dir)
    download = local_dir / ".cache" / "huggingface" / "download"
    download.mkdir(parents=True)
    (download / "Xq3rZ.0123abcd.incomplete").write_bytes(b"half")
    message = source_error(lambda: cache.add_from_folder("acme/real", local_dir))
    assert "is a partial download: huggingface_hub has not finished" in message
    assert ".cache/huggingface/download/Xq3rZ.0123abcd.incomplete" in message
    assert not (cache.hub_dir / "models--acme--real").exists()  # nothing half-written


def test_a_repo_or_revision_missing_from_the_cache_lists_what_is_there(
    tmp_path: Path, sources: tuple[Path, Path]
) -> None:
    from pytest_startup_guard import FakeHubCache

    cache = FakeHubCache(tmp_path / "cache")
    hub = sources[1]
    message = source_error(lambda: cache.add_from_cache("acme/rael", hub))
    assert (
        f"model repo 'acme/rael' is not in the hub cache {hub} (from the hub_cache_dir argument):"
        " no models--acme--rael folder (did you mean 'acme/real'?)."
        " Repos there: acme/corpus (dataset), acme/real." in message
    )
    message = source_error(lambda: cache.add_from_cache("acme/real", hub, repo_type="dataset"))
    assert "dataset repo 'acme/real' is not in the hub cache" in message
    message = source_error(lambda: cache.add_from_cache("acme/real", hub, revision="v9"))
    assert (
        f"revision 'v9' is not in acme/real in the hub cache {hub} (from the hub_cache_dir"
        " argument): no refs/v9 and no snapshots/v9."
        f" Refs there: main, v1; snapshots: {OLD_COMMIT}, {COMMIT}." in message
    )
    message = source_error(lambda: cache.add_from_cache("acme/real", hub.parent))  # HF_HOME
    assert f"folder ({hub.parent} looks like HF_HOME: its hub cache is {hub})." in message
    assert "Repos there: none." in message
    absent = tmp_path / "absent" / "hub"
    message = source_error(lambda: cache.add_from_cache("acme/real", absent))
    assert f"the hub cache {absent} (from the hub_cache_dir argument) does not exist" in message
    with pytest.raises(ValueError, match=r"invalid revision 'refs/pr/1' in add_from_cache\(\)"):
        cache.add_from_cache("acme/real", hub, revision="refs/pr/1")
    assert not (cache.hub_dir / "models--acme--real").exists()


@pytest.mark.parametrize("unfinished", [False, True])
def test_a_partial_snapshot_names_the_missing_file(
    tmp_path: Path, sources: tuple[Path, Path], unfinished: bool
) -> None:
    from pytest_startup_guard import FakeHubCache

    cache = FakeHubCache(tmp_path / "cache")
    hub = sources[1]
    folder = hub / "models--acme--real"
    pointer = folder / "snapshots" / COMMIT / "model.safetensors"
    blob = pointer.resolve()
    if unfinished:  # huggingface_hub 2.x downloads into <etag>.<8 hex>.incomplete
        blob.rename(blob.with_name(f"{blob.name}.0123abcd.incomplete"))
    else:  # a cache cleaner removed the blob
        blob.unlink()
    message = source_error(lambda: cache.add_from_cache("acme/real", hub))
    assert (
        f"acme/real@main in the hub cache {hub} (from the hub_cache_dir argument) is a partial"
        " snapshot: model.safetensors is missing, its pointer"
        f" snapshots/{COMMIT}/model.safetensors links to ../../blobs/{blob.name}, which does"
        " not exist" in message
    )
    if unfinished:
        assert f"(its download has not finished: blobs/{blob.name}.0123abcd.incomplete)" in message
    else:
        assert "(removed by a cache cleaner, or never downloaded)" in message
    assert cache.add_from_cache("acme/real", hub, revision="v1").commit == OLD_COMMIT  # whole


def test_an_unfinished_download_without_its_pointer_is_a_partial_snapshot(
    tmp_path: Path, sources: tuple[Path, Path]
) -> None:
    """huggingface_hub links the pointer only once the blob is whole: the .incomplete file is
    then the only trace of the missing file."""
    from pytest_startup_guard import FakeHubCache

    hub = sources[1]
    pointer = hub / "models--acme--real" / "snapshots" / COMMIT / "model.safetensors"
    blob = pointer.resolve()
    pointer.unlink()
    blob.rename(blob.with_name(f"{blob.name}.0123abcd.incomplete"))
    message = source_error(lambda: FakeHubCache(tmp_path / "c").add_from_cache("acme/real", hub))
    assert (
        "is a partial snapshot: a download into it has not finished"
        f" (blobs/{blob.name}.0123abcd.incomplete), so its snapshot may lack that file;"
        " finish it (hf download acme/real --revision main) or remove the .incomplete file"
        in message
    )


def test_the_default_cache_missing_names_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_startup_guard import FakeHubCache

    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "nowhere"))
    message = source_error(lambda: FakeHubCache(tmp_path / "c").add_from_cache("acme/real"))
    assert (
        f"the hub cache {tmp_path / 'nowhere' / 'hub'} (from HF_HOME, its hub folder) does not"
        " exist: pass hub_cache_dir=" in message
    )


DEFAULT_CACHE = """
from common import *

def test_default(hub_cache, monkeypatch):
    from huggingface_hub import try_to_load_from_cache

    repo = hub_cache.add_from_cache("acme/real")  # the user's cache, not hub_cache's own env
    assert repo.commit == COMMIT
    assert os.environ["HF_HUB_CACHE"] == str(hub_cache.hub_dir)  # the fake env still in force
    assert try_to_load_from_cache("acme/real", "tokenizer.json") == str(repo.pointer("tokenizer.json"))
    # a variable the test sets itself, after the fake env, is the test's own
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache.hub_dir.parent / "elsewhere"))
    with pytest.raises(Exception, match="elsewhere.*from HF_HUB_CACHE"):
        hub_cache.add_from_cache("acme/real")
"""


@pytest.mark.parametrize("variable", ["HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"])
def test_the_default_cache_is_found_as_huggingface_hub_finds_it(
    real_model: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """Read at call time, from the environment as it was before hub_cache applied its own."""
    model, _hub = source_paths()
    home = real_model.path / "user"
    hub = {
        "HF_HUB_CACHE": home / "my-hub",
        "HF_HOME": home / "hf" / "hub",
        "XDG_CACHE_HOME": home / "xdg" / "huggingface" / "hub",
        "HOME": home / ".cache" / "huggingface" / "hub",
    }[variable]
    write_source_cache(hub, model)
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    value = {"HF_HOME": hub.parent, "XDG_CACHE_HOME": hub.parent.parent, "HOME": home}
    monkeypatch.setenv(variable, str(value.get(variable, hub)))
    real_model.makepyfile(DEFAULT_CACHE)
    real_model.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


def test_across_file_systems_blobs_are_copies(real_model: pytest.Pytester) -> None:
    """Where os.link fails as across devices (EXDEV) or for a file the user may not link
    (EPERM), the blob is a copy, and the model loads all the same."""
    real_model.makepyfile(
        """
        import errno
        from common import *

        @pytest.mark.parametrize("code", [errno.EXDEV, errno.EPERM])
        @pytest.mark.parametrize("source", ["folder", "cache"])
        def test_copies(hub_cache, monkeypatch, source, code):
            from transformers import AutoTokenizer

            def link(src, dst, **kwargs):
                raise OSError(code, os.strerror(code), str(src), None, str(dst))

            monkeypatch.setattr(os, "link", link)
            repo = add(hub_cache, source)
            for name in repo.files:
                blob = repo.blob(name).stat()
                assert blob.st_ino != source_file(source, name).stat().st_ino
                assert blob.st_nlink == 1
            assert AutoTokenizer.from_pretrained("acme/real")("world")["input_ids"] == [2]
            hub_cache.corrupt(repo, "tokenizer.json", "empty")
            assert source_file(source, "tokenizer.json").stat().st_size > 0

        def test_other_errors_are_raised(hub_cache, monkeypatch):
            def link(src, dst, **kwargs):
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(os, "link", link)
            with pytest.raises(OSError, match="No space left"):
                add(hub_cache, "folder")
        """
    )
    real_model.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=5)
