"""Faults on the wire of ``hub_remote``: each is met, and the real library's reaction is what
docs/remote.md says it is.

The inner tests call the installed huggingface_hub (2.4.0) in the test process, and a release
(0.8.1) in its own process, as users do.
"""

from __future__ import annotations

import pytest
from hub_releases import release_folder

HEADER = """
import glob, os, subprocess, sys, threading, time
import pytest
from pytest_startup_guard import drop_connection, server_error, slow_body, wrong_etag

FILES = {"config.json": {"model_type": "gpt2", "n_embd": 4},
         "model.safetensors": bytes(range(256)) * 40}   # LFS by its suffix: a CDN redirect
CHUNK = 10 * 1024 * 1024   # huggingface_hub's DOWNLOAD_CHUNK_SIZE (1.x, 2.x)
"""


def test_a_dropped_body_resumes_with_range(guard_pytester: pytest.Pytester) -> None:
    old = str(release_folder("0.8.1"))
    guard_pytester.makepyfile(
        HEADER
        + f"""
OLD = {old!r}

def test_the_installed_release_resumes_in_the_same_call(hub_remote):
    big = bytes(range(256)) * (CHUNK // 256 + 4096)              # one chunk and 1 MiB more
    hub_remote.add_model("acme/big", {{"model.safetensors": big}})
    hub_remote.inject(drop_connection("model.safetensors", after_bytes=CHUNK + 1000))
    blobs = hub_remote.cache.hub_dir / "models--acme--big" / "blobs"
    partial = []
    done = threading.Event()
    def watch():   # the library waits 1 s before it resumes: the partial file is there
        while not done.is_set():
            for path in glob.glob(str(blobs / "*.incomplete")):
                try:
                    partial.append(os.path.getsize(path))
                except OSError:
                    pass
            time.sleep(0.01)
    watcher = threading.Thread(target=watch)
    watcher.start()
    from huggingface_hub import hf_hub_download
    try:
        path = hf_hub_download("acme/big", "model.safetensors")
    finally:
        done.set()
        watcher.join()
    assert open(path, "rb").read() == big
    assert CHUNK in partial, sorted(set(partial))      # whole chunks only are written
    gets = [r for r in hub_remote.requests if r.method == "GET"]
    assert [(r.status, r.range) for r in gets] == [(200, None), (206, f"bytes={{CHUNK}}-")]
    assert gets[0].sent == CHUNK + 1000 and gets[1].sent == len(big) - CHUNK
    hub_remote.assert_cache_whole("acme/big")

def test_0_8_1_leaves_the_incomplete_file_and_the_next_call_resumes(hub_remote):
    commit = hub_remote.add_model("acme/tiny", FILES)
    hub_remote.inject(drop_connection("model.safetensors", after_bytes=4096))
    code = ("import huggingface_hub as h; h.hf_hub_download('acme/tiny', 'model.safetensors',"
            " resume_download=True)")
    env = {{**os.environ, "PYTHONPATH": OLD}}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=60)
    assert first.returncode == 1 and "ChunkedEncodingError" in first.stderr, first.stderr
    blob = hub_remote.cache.hub_dir / "models--acme--tiny" / "blobs" / commit.etag(
        "model.safetensors")
    incomplete = blob.with_name(blob.name + ".incomplete")
    assert incomplete.stat().st_size == 4096
    with pytest.raises(AssertionError, match="incomplete: left by a download"):
        hub_remote.assert_cache_whole("acme/tiny")
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert blob.read_bytes() == FILES["model.safetensors"] and not incomplete.exists()
    gets = [r for r in hub_remote.requests if r.method == "GET"]
    assert [(r.status, r.range, r.sent) for r in gets] == [
        (200, None, 4096), (206, "bytes=4096-", len(FILES["model.safetensors"]) - 4096)]
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2)


def test_a_5xx_a_wrong_etag_and_a_slow_body_as_the_library_meets_them(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        HEADER
        + """
from huggingface_hub import hf_hub_download, snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError

def test_a_5xx_on_the_repo_info_of_a_cold_cache_is_a_local_entry_error(hub_remote):
    hub_remote.add_model("acme/tiny", FILES)
    hub_remote.inject(server_error(status=500))
    with pytest.raises(LocalEntryNotFoundError, match="500"):
        snapshot_download("acme/tiny")
    assert [r.status for r in hub_remote.requests] == [500]      # not retried

def test_a_5xx_on_the_repo_info_of_a_warm_cache_falls_back_to_it(hub_remote):
    commit = hub_remote.add_model("acme/tiny", FILES)
    assert snapshot_download("acme/tiny").endswith(commit.commit)
    hub_remote.inject(server_error(status=503))
    assert snapshot_download("acme/tiny").endswith(commit.commit)
    hub_remote.assert_cache_whole("acme/tiny")

def test_a_5xx_on_a_files_metadata_is_retried(hub_remote):
    commit = hub_remote.add_model("acme/tiny", FILES)
    hub_remote.inject(server_error("config.json", status=503))
    path = hf_hub_download("acme/tiny", "config.json")
    assert open(path, "rb").read() == commit.files["config.json"]
    heads = [r.status for r in hub_remote.requests if r.method == "HEAD"]
    assert heads == [503, 200]

def test_a_wrong_etag_names_the_blob_and_nothing_checks_it(hub_remote):
    commit = hub_remote.add_model("acme/tiny", FILES)
    hub_remote.inject(wrong_etag("config.json"), wrong_etag("model.safetensors"))
    snapshot_download("acme/tiny")
    blobs = hub_remote.cache.hub_dir / "models--acme--tiny" / "blobs"
    assert sorted(p.name for p in blobs.iterdir() if not p.name.endswith(".lock")) == [
        "0" * 40, "0" * 64]
    with pytest.raises(AssertionError) as failure:
        hub_remote.assert_cache_whole("acme/tiny")
    for name in ("config.json", "model.safetensors"):
        assert f"{name} points to" in str(failure.value) and commit.etag(name) in str(
            failure.value)

def test_a_slow_body_is_waited_for(hub_remote):
    hub_remote.add_model("acme/tiny", FILES)
    hub_remote.inject(slow_body("model.safetensors", delay=0.05, chunk=1024))
    started = time.monotonic()
    path = hf_hub_download("acme/tiny", "model.safetensors")
    assert time.monotonic() - started >= 9 * 0.05        # 10 chunks, 9 pauses
    assert open(path, "rb").read() == FILES["model.safetensors"]
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=5)


def test_a_fault_no_request_met_fails_the_test_unless_allowed(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        HEADER
        + """
def test_unmet(hub_remote):
    hub_remote.add_model("acme/tiny", FILES)
    hub_remote.inject(drop_connection("model.safetensors", after_bytes=10, nth=2))
    from huggingface_hub import hf_hub_download
    hf_hub_download("acme/tiny", "model.safetensors")

def test_allowed(hub_remote):
    hub_remote.inject(server_error("config.json", allow_miss=True))
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*startup-guard hub_remote:*",
            "*drop_connection('model.safetensors', after_bytes=10) at request 2, times=1:"
            " no request met it (1 matching request(s) seen; allow_miss=True if that may be)*",
        ]
    )


def test_a_process_that_reaches_past_loopback_fails_the_test(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        """
import subprocess, sys

CODE = '''
import socket
try:
    socket.getaddrinfo("huggingface.co", 443)
except OSError:
    pass
s = socket.socket()
s.settimeout(0.2)
try:
    s.connect(("192.0.2.1", 443))   # TEST-NET-1: never routed
except OSError:
    pass
'''

def test_out(hub_remote, child_runtime):
    subprocess.run([sys.executable, "-c", CODE], timeout=30)

def test_loopback_only(hub_remote, child_runtime):
    subprocess.run([sys.executable, "-c", "import socket; socket.getaddrinfo('localhost', 80)"],
                   timeout=30)
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*process * looked up huggingface.co: under hub_remote a process reaches loopback"
            " only*",
            "*process * connected to 192.0.2.1:443: under hub_remote*",
        ]
    )
