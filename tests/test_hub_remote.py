"""``hub_remote``: the real huggingface_hub and transformers download from the loopback hub, online.

Each test runs an inner pytest session as users do (``-p startup_guard``) whose tests call the
real ``snapshot_download``, ``hf_hub_download`` and ``AutoConfig.from_pretrained``; released
versions run in subprocesses with their folder first on ``PYTHONPATH`` (tests/hub_releases.py).
"""

from __future__ import annotations

import pytest
from hub_releases import release_folder

FILES = """
FILES = {"config.json": {"model_type": "gpt2", "n_embd": 4},
         "model.safetensors": bytes(range(256)) * 40}   # LFS by its suffix: a CDN redirect
"""


def test_the_real_library_downloads_cold_refreshes_and_raises_as_on_the_hub(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        FILES
        + """
import os
import pytest

def test_cold_then_refresh(hub_remote):
    first = hub_remote.add_model("acme/tiny", FILES)
    assert not any(hub_remote.cache.hub_dir.glob("models--*"))        # cold
    from huggingface_hub import hf_hub_download, snapshot_download
    assert snapshot_download("acme/tiny").endswith(first.commit)
    hub_remote.assert_cache_whole("acme/tiny")
    second = hub_remote.push("acme/tiny", {"config.json": {"model_type": "gpt2", "n_embd": 8}})
    assert snapshot_download("acme/tiny").endswith(second.commit)     # refs/main moves
    hub_remote.assert_cache_whole("acme/tiny")
    ref = hub_remote.cache.hub_dir / "models--acme--tiny" / "refs" / "main"
    assert ref.read_text() == second.commit
    assert open(hf_hub_download("acme/tiny", "config.json")).read() == (
        second.files["config.json"].decode())
    from transformers import AutoConfig
    assert AutoConfig.from_pretrained("acme/tiny").n_embd == 8
    methods = {(r.method, r.path.split("?")[0].split("/")[1]) for r in hub_remote.requests}
    assert ("HEAD", "acme") in methods and ("GET", "lfs-cdn") in methods, methods

def test_the_same_commit_as_the_fake_cache(hub_cache, hub_remote):
    served = hub_remote.add_model("acme/tiny", FILES)
    assert hub_remote.cache is hub_cache
    cached = hub_cache.add_model("acme/warm", FILES)
    assert served.etag("model.safetensors") == cached.files["model.safetensors"]
    from huggingface_hub import snapshot_download
    snapshot_download("acme/tiny")
    hub_remote.assert_cache_whole("acme/tiny")

def test_what_the_remote_lacks(hub_remote):
    hub_remote.add_model("acme/tiny", FILES)
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import (
        EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError)
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download("acme/nothing")
    with pytest.raises(RevisionNotFoundError):
        snapshot_download("acme/tiny", revision="v9")
    with pytest.raises(EntryNotFoundError):
        hf_hub_download("acme/tiny", "missing.json")
    commit = hub_remote.add_model("acme/tiny", FILES)
    missing = hub_remote.cache.hub_dir / "models--acme--tiny" / ".no_exist" / commit.commit
    assert (missing / "missing.json").is_file()   # the miss is cached, as from the Hub
    statuses = [r.status for r in hub_remote.requests]
    assert statuses.count(404) >= 3, statuses
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=3)


def test_released_versions_download_from_it_in_their_own_processes(
    guard_pytester: pytest.Pytester,
) -> None:
    folders = [str(release_folder(version)) for version in ("0.8.1", "1.30.0")]
    guard_pytester.makepyfile(
        FILES
        + f"""
import os, subprocess, sys
import pytest

FOLDERS = {folders!r}
CODE = '''
import huggingface_hub, sys
path = huggingface_hub.snapshot_download(sys.argv[1], revision="main")
print(huggingface_hub.__version__, path)
'''

@pytest.mark.parametrize("folder", FOLDERS)
def test_cold(hub_remote, folder):
    commit = hub_remote.add_model("acme/tiny", FILES)
    env = {{**os.environ, "PYTHONPATH": folder}}
    done = subprocess.run([sys.executable, "-c", CODE, "acme/tiny"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    version = os.path.basename(folder)
    assert done.stdout.startswith(version + " ") and done.stdout.strip().endswith(commit.commit)
    hub_remote.assert_cache_whole("acme/tiny")

def test_a_missing_repo_is_the_libraries_own_error_in_the_process_output(hub_remote):
    hub_remote.add_model("acme/tiny", FILES)
    env = {{**os.environ, "PYTHONPATH": FOLDERS[0]}}
    done = subprocess.run([sys.executable, "-c", CODE, "acme/nothing"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "huggingface_hub.utils._errors.RepositoryNotFoundError: 404" in done.stderr, (
        done.stderr)
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=3)


def test_a_fleet_of_servers_downloads_at_once_into_one_cache(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        server="""
import http.server, sys
from huggingface_hub import snapshot_download
path = snapshot_download(sys.argv[2])
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(path.encode())
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
""",
        test_fleet=FILES
        + """
import sys
from pytest_startup_guard import ready

def test_two(hub_remote, server_fleet):
    commit = hub_remote.add_model("acme/tiny", FILES)
    fleet = server_fleet.launch([sys.executable, "server.py", "{port}", "acme/tiny"],
                                count=2, ready=ready.http("/"))
    fleet.assert_all_ready()
    hub_remote.assert_cache_whole("acme/tiny")
    gets = [r for r in hub_remote.requests if r.method == "GET" and "model.safetensors" in r.path]
    assert 1 <= len(gets) <= 2, gets
""",
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)


def test_assert_cache_whole_names_each_defect(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        FILES
        + """
import os, shutil
import pytest

@pytest.fixture
def whole(hub_remote):
    commit = hub_remote.add_model("acme/tiny", FILES)
    from huggingface_hub import snapshot_download
    snapshot_download("acme/tiny")
    hub_remote.assert_cache_whole("acme/tiny")
    folder = hub_remote.cache.hub_dir / "models--acme--tiny"
    return hub_remote, commit, folder

def fails(remote, words):
    with pytest.raises(AssertionError, match=words):
        remote.assert_cache_whole("acme/tiny")

def test_a_blob_gone(whole):
    remote, commit, folder = whole
    os.remove(folder / "blobs" / commit.etag("config.json"))
    fails(remote, "config.json.*No such file")

def test_a_duplicate_blob(whole):
    remote, commit, folder = whole
    shutil.copy(folder / "blobs" / commit.etag("config.json"), folder / "blobs" / ("0" * 40))
    fails(remote, "one content in 2 blobs")

def test_an_incomplete_download_left(whole):
    remote, commit, folder = whole
    (folder / "blobs" / "abc.incomplete").write_bytes(b"x")
    fails(remote, "abc.incomplete: left by a download")

def test_a_ref_naming_another_commit(whole):
    remote, commit, folder = whole
    (folder / "refs" / "main").write_text("f" * 40)
    fails(remote, "refs/main names 'fff")

def test_a_pointer_that_is_a_plain_file(whole):
    remote, commit, folder = whole
    pointer = folder / "snapshots" / commit.commit / "config.json"
    pointer.unlink()
    pointer.write_bytes(b"{}")
    fails(remote, "not a pointer")
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=5)
