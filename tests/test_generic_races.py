"""Generic races on any shared folder, and stale locks: through ``-p startup_guard`` as users run it.

Each race is shown both ways on a real server: a naive reader dies, a retrying one survives and
was really hit. Stale locks are shown with a server that waits forever (hung, the lock named),
one that fails closed naming the lock, and one that breaks it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from report_schema import validate
from user_env import user_env

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "examples" / "servers"

COMMON = f"""
import json, os, sys
from pathlib import Path
import pytest
from pytest_startup_guard import ready

CACHE_SERVER = [sys.executable, {str(SERVERS / "cache_server.py")!r}, "--port", "{{port}}"]
LOCK_SERVER = [sys.executable, {str(SERVERS / "lock_server.py")!r}, "--port", "{{port}}"]
CONFIG_SERVER = [sys.executable, {str(SERVERS / "config_server.py")!r}, "--model", "acme/tiny",
                 "--port", "{{port}}"]

def kernel_cache(shared_dir):
    '''A compile cache with one kernel entry, as the servers find it at start-up.'''
    (shared_dir / "kernels").mkdir()
    entry = shared_dir / "kernels" / "matmul.json"
    entry.write_text(json.dumps({{"kernel": "matmul", "blocks": list(range(64))}}))
    return entry
"""


@pytest.fixture
def races_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


GENERIC = ["file_replace", "file_rewrite", "partial_write", "folder_move"]


@pytest.mark.parametrize("race", GENERIC)
def test_a_generic_race_kills_a_naive_reader_and_a_retrying_one_survives_it(
    races_pytester: pytest.Pytester, race: str
) -> None:
    races_pytester.makepyfile(
        f"""
        from common import *

        @pytest.mark.parametrize("policy", ["naive", "retry"])
        def test_kernel_cache(shared_dir, hub_race, server_fleet, policy):
            entry = kernel_cache(shared_dir)
            armed = hub_race.arm_path({race!r}, entry)
            fleet = server_fleet.launch(
                CACHE_SERVER + ["--cache", str(shared_dir), "--policy", policy],
                count=2, ready=ready.http("/health"), timeout=20,
            )
            assert all(server.hits for server in fleet.servers), fleet.summary()
            if policy == "naive":
                fleet.assert_all_failed(match="matmul")
            else:
                fleet.assert_all_ready()
            fleet.stop()
            armed.disarm()  # what teardown does: every window closed, the folder whole again
            assert armed.windows and all(w.closed_t is not None for w in armed.windows)
            assert json.loads(entry.read_text())["blocks"] == list(range(64))
        """
    )
    result = races_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2)


def test_a_race_matrix_mixes_hub_races_generic_races_and_stale_locks(
    races_pytester: pytest.Pytester,
) -> None:
    races_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.startup_races(transient=["pointer_swap", "file_replace", "file_rewrite"])
        def test_hub_config(startup_case, hub_cache, server_fleet):
            repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
            startup_case.apply(repo, "config.json")
            startup_case.check(server_fleet.launch(
                CONFIG_SERVER + ["--policy", "retry"], count=2, ready=ready.http("/health")))

        @pytest.mark.startup_races(transient=["partial_write", "folder_move"])
        def test_kernel(startup_case, shared_dir, server_fleet):
            entry = kernel_cache(shared_dir)
            startup_case.apply(entry)
            startup_case.check(server_fleet.launch(
                CACHE_SERVER + ["--cache", str(shared_dir), "--policy", "retry"],
                count=2, ready=ready.http("/health")))
        """
    )
    result = races_pytester.runpytest_subprocess("-p", "startup_guard", "-v")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "*test_hub_config?transient-file_replace? PASSED*",
            "*test_kernel?transient-folder_move? PASSED*",
        ]
    )


STALE_TEST = """
from common import *

@pytest.mark.startup_races(stale=["stale_lock"])
@pytest.mark.parametrize("on_stale", ["wait", "fail", "break"])
def test_build_lock(startup_case, shared_dir, server_fleet, on_stale):
    build = shared_dir / "build"
    startup_case.apply(build / "lock")
    fleet = server_fleet.launch(
        LOCK_SERVER + ["--build", str(build), "--on-stale", on_stale, "--lock-timeout", "1"],
        count=2, ready=ready.http("/health"), timeout=4,
    )
    startup_case.check(fleet)

@pytest.mark.startup_races(stale=["stale_soft_lock"])
def test_soft_lock(startup_case, shared_dir, server_fleet):
    build = shared_dir / "build"
    startup_case.apply(build / "lock")
    fleet = server_fleet.launch(
        LOCK_SERVER + ["--build", str(build), "--style", "soft"],
        count=2, ready=ready.http("/health"), timeout=4,
    )
    startup_case.check(fleet)
"""


def test_a_stale_lock_must_be_broken_or_failed_on_never_waited_on_forever(
    races_pytester: pytest.Pytester,
) -> None:
    races_pytester.makepyfile(STALE_TEST)
    report = races_pytester.path / "report.json"
    result = races_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-v", f"--startup-guard-report={report}"
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_build_lock?stale-stale_lock-wait? FAILED*",
            "*test_build_lock?stale-stale_lock-fail? PASSED*",
            "*test_build_lock?stale-stale_lock-break? PASSED*",
            "*test_soft_lock?stale-stale_soft_lock? PASSED*",
            "*server 0 hung on the stale lock */build/lock*waiting forever is failing*",
        ]
    )
    document = json.loads(report.read_text())
    assert validate(document) == []
    tests = {test["nodeid"].split("::")[-1]: test for test in document["tests"]}
    hung = tests["test_build_lock[stale-stale_lock-wait]"]
    assert hung["verdict"]["kind"] == "stale" and hung["verdict"]["passed"] is False
    race = hung["races"][0]
    assert race["name"] == "stale_lock" and race["repo"] is None
    assert race["path"].endswith(os.path.join("build", "lock")) and race["hits_total"] >= 2
    assert "build/lock under shared_dir" in race["target"]


def test_a_stale_lock_a_server_never_takes_proves_nothing(races_pytester: pytest.Pytester) -> None:
    races_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.startup_races(stale=["stale_lock"])
        def test_unrelated_lock(startup_case, shared_dir, server_fleet):
            kernel_cache(shared_dir)
            startup_case.apply(shared_dir / "other" / "lock")
            startup_case.check(server_fleet.launch(
                CACHE_SERVER + ["--cache", str(shared_dir)], count=1, ready=ready.http("/health")))
        """
    )
    result = races_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*server 0 never touched the stale lock */other/lock*proves*"])


def test_a_race_on_a_hard_linked_file_never_writes_into_its_source(
    races_pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    source = tmp_path_factory.mktemp("source") / "matmul.json"
    source.write_text(json.dumps({"kernel": "matmul", "blocks": list(range(64))}))
    before = (source.read_bytes(), source.stat().st_mtime_ns)
    races_pytester.makepyfile(
        f"""
        from common import *
        from pytest_startup_guard import on_access

        @pytest.mark.parametrize("race", ["file_rewrite", "partial_write", "file_replace"])
        def test_linked(shared_dir, hub_race, server_fleet, race):
            (shared_dir / "kernels").mkdir()
            os.link({str(source)!r}, shared_dir / "kernels" / "matmul.json")
            hub_race.arm_path(race, shared_dir / "kernels" / "matmul.json",
                              trigger=on_access(hold=0.3))
            fleet = server_fleet.launch(CACHE_SERVER + ["--cache", str(shared_dir)],
                                        count=1, ready=ready.http("/health"))
            fleet.assert_all_failed()
        """
    )
    races_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=3)
    assert (source.read_bytes(), source.stat().st_mtime_ns) == before


def test_bad_paths_and_names_are_clear_errors(
    races_pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    races_pytester.makepyfile(
        f"""
        from common import *
        from pytest_startup_guard import StartupGuardError, UnknownNameError

        def test_outside(shared_dir, hub_race):
            with pytest.raises(StartupGuardError) as error:
                hub_race.arm_path("file_replace", {str(outside / "x.json")!r})
            print("OUTSIDE:", error.value)
            assert "shared_dir" in str(error.value) and "tmp_path" in str(error.value)

        def test_symlink_escape(shared_dir, hub_race):
            os.symlink({str(outside)!r}, shared_dir / "link")
            with pytest.raises(StartupGuardError, match="not under a folder the plugin owns"):
                hub_race.arm_path("file_replace", shared_dir / "link" / "x.json")

        def test_root_itself(shared_dir, hub_race):
            with pytest.raises(StartupGuardError, match="is shared_dir itself"):
                hub_race.arm_path("folder_move", shared_dir)

        def test_hub_race_on_a_path(shared_dir, hub_race):
            (shared_dir / "a.json").write_text("{{}}")
            with pytest.raises(StartupGuardError, match="use hub_race.arm\\\\('pointer_swap', repo"):
                hub_race.arm_path("pointer_swap", shared_dir / "a.json")

        def test_unknown_race(shared_dir, hub_race):
            with pytest.raises(UnknownNameError, match="file_replace"):
                hub_race.arm_path("file_replaced", shared_dir / "a.json")

        def test_missing_file(shared_dir, hub_race):
            with pytest.raises(StartupGuardError, match="does not exist"):
                hub_race.arm_path("file_replace", shared_dir / "a.json", allow_miss=True)

        def test_folder_for_a_file_race(shared_dir, hub_race):
            (shared_dir / "sub").mkdir()
            with pytest.raises(StartupGuardError, match="arm 'folder_move' on a folder"):
                hub_race.arm_path("file_rewrite", shared_dir / "sub", allow_miss=True)

        def test_lock_where_a_file_is(shared_dir, hub_race):
            (shared_dir / "lock").write_text("")
            with pytest.raises(StartupGuardError, match="a file is already at"):
                hub_race.stale_lock(shared_dir / "lock", allow_miss=True)

        def test_shared_cache(shared_hub_cache, hub_race):
            with pytest.raises(StartupGuardError, match="copy_of"):
                hub_race.arm_path("file_replace", shared_hub_cache.root / "x")

        @pytest.mark.startup_races(corrupt=["empty"])
        def test_corrupt_on_a_path(startup_case, shared_dir):
            with pytest.raises(StartupGuardError, match="apply\\\\(repo, filename\\\\)"):
                startup_case.apply(shared_dir / "a.json")
        """
    )
    result = races_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(
        [f"*OUTSIDE: hub_race.arm_path('file_replace'): {outside}/x.json is not under a folder*"]
    )


def test_an_unknown_stale_lock_name_is_a_clear_error(races_pytester: pytest.Pytester) -> None:
    races_pytester.makepyfile(
        """
        import pytest

        @pytest.mark.startup_races(stale=["stale_lok"])
        def test_bad_stale_name(startup_case):
            pass
        """
    )
    result = races_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*unknown stale lock 'stale_lok'*did you mean 'stale_lock'?*stale_lock, stale_soft_lock*"]
    )


def test_the_default_trigger_of_a_stale_lock_leaves_it_until_teardown(
    races_pytester: pytest.Pytester,
) -> None:
    races_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.parametrize("soft", [False, True])
        def test_left(shared_dir, hub_race, soft):
            lock = shared_dir / "build" / "lock"
            armed = hub_race.stale_lock(lock, soft=soft, allow_miss=True)
            assert lock.exists() and armed.is_open and armed.trigger.describe() == "placed()"
            if not soft:
                assert lock.read_bytes() == b""
            with open(lock, "rb"):
                pass  # the test process is watched too: this is a hit
            assert armed.hits and armed.hits[0].path == str(lock)
            print("LOCK", lock)
        """
    )
    result = races_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=2)
    locks = re.findall(r"LOCK (\S+)", result.stdout.str())
    assert len(locks) == 2 and not any(os.path.lexists(lock) for lock in locks)


def test_every_fault_example_gives_the_expected_verdict(
    tmp_path: Path,
) -> None:
    """The examples of the faults beyond the hub cache (``faults.FAULT_FILES``: the demo's rows):
    observed verdicts = ``faults.EXPECTED``."""
    sys.path.insert(0, str(ROOT / "examples"))
    from faults import EXPECTED, FAULT_FILES, FAULT_ID, row_of

    junit = tmp_path / "faults.xml"
    env = user_env()
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "no:cacheprovider", "-q",
         f"--basetemp={tmp_path / 'tmp'}", f"--junitxml={junit}", "-p", "xdist", "-n", "2",
         *FAULT_FILES],
        cwd=ROOT / "examples", env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    observed: dict[tuple[str, str], str] = {}
    errors = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        match = FAULT_ID.search(case.get("name", ""))
        assert match, case.get("name")
        kind, fault, policy = match.groups()
        key = (row_of(kind, fault), policy)
        error = case.find("error")  # at set-up or teardown: its own entry, never a pass
        if error is not None:
            errors.append(f"{case.get('name')}: {(error.text or '')[-1500:]}")
        failed = case.find("failure") is not None or error is not None
        observed[key] = "fail" if failed or observed.get(key) == "fail" else "pass"
    wanted = {
        (fault, policy): verdict
        for fault, policies in EXPECTED.items()
        for policy, verdict in policies.items()
    }
    differ = {key: (observed.get(key), wanted.get(key)) for key in {*observed, *wanted}
              if observed.get(key) != wanted.get(key)}  # fmt: skip
    assert not differ, (
        f"(observed, expected): {differ}\n" + "\n".join(errors) + completed.stdout[-2000:]
    )


def test_a_race_given_the_other_kind_of_target_names_itself(tmp_path: Path) -> None:
    """``@Race.takes`` narrows once: a hub race handed a path is a clear TypeError, never an
    AttributeError in its body; a path race handed a hub file likewise."""
    from pytest_startup_guard.cache.hubcache import FakeHubCache
    from pytest_startup_guard.races.base import PathTarget, Race, RaceTarget
    from pytest_startup_guard.races.catalog import RACES

    path = PathTarget(path=tmp_path / "kernel.json", root=tmp_path, root_name="tmp_path")
    with pytest.raises(
        TypeError, match="race 'pointer_swap': open\\(\\) takes a RaceTarget, not a PathTarget"
    ):
        RACES["pointer_swap"]().open(path)
    cache = FakeHubCache(tmp_path / "cache")
    repo = cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    with pytest.raises(
        TypeError, match="race 'file_replace': open\\(\\) takes a PathTarget, not a RaceTarget"
    ):
        RACES["file_replace"]().open(RaceTarget.of(repo, "config.json", None))
    assert json.loads(repo.pointer("config.json").read_text()) == {"model_type": "gpt2"}
    with pytest.raises(TypeError, match=r"invalid kind <class 'int'> for Race.takes\(\): expected"):
        Race.takes(int)  # type: ignore[type-var]
