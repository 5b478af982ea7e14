"""``server_fleet.explore_writer``: a real writer paused after each of its steps, the readers held
at each of their access points until then; every (step, point) pair judged, with its replay."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hub_releases import release_folder

STUB = (Path(__file__).parent / "stub_server.py").read_text()

PLAIN = """
import sys
import pytest
from pytest_startup_guard import ready

REWRITE = '''
import os, sys
ref, how = sys.argv[1], sys.argv[2]
commit = open(ref).read()
if how == "in_place":      # as snapshot_download up to huggingface_hub 1.30.0
    with open(ref, "w") as handle:
        handle.write(commit)
else:                      # as 1.31.0: a temporary file moved into place
    with open(ref + ".tmp", "w") as handle:
        handle.write(commit)
    os.replace(ref + ".tmp", ref)
'''
PROBE = ready.http("/")

def readers():
    return [sys.executable, "stub.py", "naive", "{port}", "acme/tiny"]

def explore(hub_cache, server_fleet, how, **options):
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    writer = [sys.executable, "-c", REWRITE, str(repo.ref()), how]
    return server_fleet.explore_writer(writer, readers(), ready=PROBE, **options)
"""


@pytest.fixture
def writer_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(stub=STUB)
    return guard_pytester


def test_a_ref_rewritten_in_place_fails_where_it_is_empty(writer_pytester: pytest.Pytester) -> None:
    writer_pytester.makepyfile(
        PLAIN
        + """
def test_in_place(hub_cache, server_fleet):
    exploration = explore(hub_cache, server_fleet, "in_place")
    print(exploration)
    ops = [step.op for step in exploration.steps]
    assert ops == ["open", "open", "startup_guard.opened"], ops
    assert [point.path.split("/")[-1] for point in exploration.points] == ["main", "config.json"]
    failed = {pair.key for pair in exploration.failures}
    assert failed == {"2:1"}, exploration
    exploration.assert_no_failures()

def test_atomic(hub_cache, server_fleet):
    exploration = explore(hub_cache, server_fleet, "atomic")
    print(exploration)
    exploration.assert_no_failures()
"""
    )
    result = writer_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    print(result.stdout.str())
    result.assert_outcomes(failed=1, passed=1)


def test_a_writer_that_varies_or_fails_alone_is_refused_clearly(
    writer_pytester: pytest.Pytester,
) -> None:
    """Steps that differ between two clean runs cannot be paused one by one, and a writer that
    fails without any reader has nothing to explore: each is an error that says so."""
    writer_pytester.makepyfile(
        PLAIN
        + """
from pytest_startup_guard import StartupGuardError

VARIES = "import os, sys; open(os.path.join(sys.argv[1], os.urandom(4).hex()), 'w').close()"

def test_varies(hub_cache, server_fleet):
    hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    writer = [sys.executable, "-c", VARIES, str(hub_cache.hub_dir)]
    with pytest.raises(StartupGuardError, match="is not deterministic: its step 1 was"):
        server_fleet.explore_writer(writer, readers(), ready=PROBE)

def test_fails(hub_cache, server_fleet):
    hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    writer = [sys.executable, "-c", "raise OSError('no space')"]
    with pytest.raises(StartupGuardError, match="exited with code 1 without any reader.*no space"):
        server_fleet.explore_writer(writer, readers(), ready=PROBE)
"""
    )
    result = writer_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2)


def replay_args(text: str) -> tuple[str, dict[str, str], list[str]]:
    """The pair, the environment and the pytest arguments of the first replay command of a
    pair in ``text``: ``STARTUP_GUARD_WRITER_PAIR=K:J pytest ...`` or ``pytest ...
    --startup-guard-writer-pair=K:J``."""
    match = re.search(r"replay: STARTUP_GUARD_WRITER_PAIR=(\d+:\d+) pytest (.+)", text)
    flag = re.search(r"replay: pytest (.+--startup-guard-writer-pair=(\d+:\d+).*)", text)
    if match:
        return match.group(1), {"STARTUP_GUARD_WRITER_PAIR": match.group(1)}, match.group(2).split()
    assert flag, text
    return flag.group(2), {}, flag.group(1).split()


def test_a_replay_runs_that_pair_alone_and_fails_again(
    writer_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay a failed pair prints runs that pair alone (no other pair is run) and fails
    the same way."""
    writer_pytester.makepyfile(
        PLAIN
        + """
def test_in_place(hub_cache, server_fleet):
    exploration = explore(hub_cache, server_fleet, "in_place")
    print("pairs run:", [pair.key for pair in exploration.pairs])
    exploration.assert_no_failures()
"""
    )
    first = writer_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    first.assert_outcomes(failed=1)
    pair, env, args = replay_args(first.stdout.str())
    assert pair == "2:1"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    again = writer_pytester.runpytest_subprocess(*args, "-s")
    again.assert_outcomes(failed=1)
    text = again.stdout.str()
    assert "pairs run: ['2:1']" in text and "1 of 1 pairs failed" in text, text


READER = (Path(__file__).parent / "writer_reader.py").read_text()

HUB = """
import os, subprocess, sys
from pathlib import Path
import pytest
from pytest_startup_guard import ready

RELEASES = Path(sys.prefix) / "hub-releases"
A = {"config.json": {"model_type": "gpt2"}}
B = {"config.json": {"model_type": "gpt2", "n_layer": 2}}

def release(version):
    return None if version == "installed" else RELEASES / version

def warm(hub_remote):
    # The readers' cache at commit A, as the installed huggingface_hub downloads it.
    code = "from huggingface_hub import snapshot_download; snapshot_download('acme/tiny')"
    subprocess.run([sys.executable, "-c", code], env={**os.environ, **hub_remote.env}, check=True)

def refresh(hub_remote, server_fleet, version, **options):
    commit_a = hub_remote.add_model("acme/tiny", A).commit
    warm(hub_remote)
    hub_remote.push("acme/tiny", B)
    writer = hub_remote.writer("acme/tiny", release=release(version))
    readers = [sys.executable, "writer_reader.py", "pinned", "acme/tiny", "config.json", commit_a]
    return server_fleet.explore_writer(writer, readers, ready=ready.log("ready"), points=[1], **options)
"""


@pytest.fixture
def hub_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(writer_reader=READER)
    return guard_pytester


def test_snapshot_download_1_30_leaves_refs_main_empty_for_a_moment(
    hub_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """huggingface_hub 1.30.0 refreshing a warm cache to commit B opens refs/main for writing,
    then writes: a reader held until right after that open reads an empty ref and dies. The
    pair's replay runs it alone and it fails again."""
    release_folder("1.30.0")
    hub_pytester.makepyfile(
        HUB
        + """
def test_refresh(hub_remote, server_fleet):
    exploration = refresh(hub_remote, server_fleet, "1.30.0")
    print(exploration)
    exploration.assert_no_failures()
"""
    )
    result = hub_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert re.search(r"step \d+ open models--acme--tiny/refs/main +x +point 1 .*FAILED", text), text
    assert "refs/main of acme/tiny holds '', not a commit" in text
    _pair, env, args = replay_args(text)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    again = hub_pytester.runpytest_subprocess(*args, "-s")
    again.assert_outcomes(failed=1)
    assert "1 of 1 pairs failed" in again.stdout.str()


@pytest.mark.parametrize("version", ["1.31.0", "installed"])
def test_a_writer_that_replaces_the_ref_leaves_no_failing_pair(
    hub_pytester: pytest.Pytester, version: str
) -> None:
    """1.31.0 and the installed huggingface_hub (2.4.0) write the ref to a temporary file and
    move it into place: every state a reader can meet is one it survives."""
    if version != "installed":
        release_folder(version)
    hub_pytester.makepyfile(
        HUB
        + f"""
def test_refresh(hub_remote, server_fleet):
    exploration = refresh(hub_remote, server_fleet, {version!r})
    print(exploration)
    assert any(step.path.endswith("refs/main") for step in exploration.steps)
    assert len(exploration.pairs) >= 3 and not exploration.failures
"""
    )
    result = hub_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=1)


COLD = """
import sys
from pathlib import Path
from pytest_startup_guard import ready

def explore(hub_remote, server_fleet, version):
    hub_remote.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    release = None if version == "installed" else Path(sys.prefix) / "hub-releases" / version
    writer = hub_remote.writer("acme/tiny", call="hf_hub_download", filename="config.json",
                               release=release)
    readers = [sys.executable, "writer_reader.py", "download", "acme/tiny", "config.json"]
    return server_fleet.explore_writer(writer, readers, ready=ready.log("ready"), points=[1],
                                       cache=hub_remote.cache)
"""


@pytest.mark.parametrize("version", ["0.10.0", "installed"])
def test_two_downloads_of_one_file_on_a_cold_cache(
    hub_pytester: pytest.Pytester, version: str
) -> None:
    """huggingface/huggingface_hub#1108, #1133: 0.10.0 removes the pointer, then makes the
    symlink; a reader that downloads the same file meanwhile makes it first, and the writer
    dies of FileExistsError. The installed huggingface_hub takes a pointer that is already
    there: no pair fails."""
    if version != "installed":
        release_folder(version)
    hub_pytester.makepyfile(
        COLD
        + f"""
def test_cold(hub_remote, server_fleet):
    exploration = explore(hub_remote, server_fleet, {version!r})
    print(exploration)
    exploration.assert_no_failures()
"""
    )
    result = hub_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    text = result.stdout.str()
    if version == "0.10.0":
        result.assert_outcomes(failed=1)
        assert "writer: exited with code 1: FileExistsError" in text, text
    else:
        result.assert_outcomes(passed=1)


def test_the_download_incident_example_catches_0_10_and_passes_the_installed_release(
    guard_pytester: pytest.Pytester,
) -> None:
    """examples/test_incident_download.py, as a user runs it: huggingface/huggingface_hub#1108."""
    release_folder("0.10.0")
    example = Path(__file__).resolve().parent.parent / "examples" / "test_incident_download.py"
    guard_pytester.makepyfile(test_incident_download=example.read_text())
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-rf")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*download-0.10.0*", "*FileExistsError*"])
    assert "download-installed] FAILED" not in result.stdout.str()
