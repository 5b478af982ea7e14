"""Misuses of the plugin, as data: what a new user gets wrong, and the words the error must say.

Each ``Misuse`` names where the mistake is made (``Where``), what is given, and the words the
error must contain: at least the argument's name and the bad value. ``tests/test_misuse.py``
runs every case as a user would and checks that the run fails with the plugin's own error
(not an internal exception, not a traceback of the plugin's internals), saying those words;
``benchmarks/trust_misuse.py`` counts them.

- ``api``: Python code in a test that asks for no fixture of the plugin but ``tmp_path`` and
  ``hub_cache`` (``given`` is the test's body).
- ``fixture``: Python code in a test that asks for ``fixtures`` (the plugin's, and
  ``tmp_path``); ``marker`` on the line above the test where the case needs one.
- ``marker``: a test file whose markers are wrong: the collection error must say the words.
- ``option``: command-line arguments; ``env``: ``NAME=value`` in the environment; ``ini``:
  lines of the ini file (pytester writes a tox.ini; ``args`` are added to the command line).
  The run must stop before any test with a usage error. Every one runs on a folder holding
  ``test_plain.py`` (one plain test), ``a_file.txt``, ``a_folder/``, ``empty.json``,
  ``bad.json`` and ``a_link.json`` (a symbolic link to ``empty.json``).
- ``cli``: the arguments of ``startup-guard-report``, run in that same folder.

``needs`` names another part of issue 31 the case waits for, where its fix is not in the
argument checks (the lead's list); empty for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Where = Literal["api", "fixture", "marker", "option", "env", "ini", "cli"]
WHERES: tuple[Where, ...] = ("api", "fixture", "marker", "option", "env", "ini", "cli")


@dataclass(frozen=True)
class Misuse:
    """One mistake a user can make, where, and the words the error must say."""

    id: str
    where: Where
    given: str
    words: tuple[str, ...]
    fixtures: tuple[str, ...] = ()
    marker: str = ""
    args: tuple[str, ...] = ()
    needs: str = ""
    # ``fixture`` cases: whole tests written before the case's test in the same file (a test
    # that keeps a fixture's object in a global, for the case's test to use after it ended).
    before: str = ""


# What every ``api`` and ``fixture`` case may use (the inner test file's first lines).
PRELUDE = """
import math
import sys

import pytest
from pytest_startup_guard import (
    CORRUPTIONS,
    RACES,
    FakeHubCache,
    Race,
    after,
    assert_fails_closed,
    assert_survives,
    chaos,
    check_env_choices,
    check_start_methods,
    cpu_load,
    detect_target,
    import_race,
    on_access,
    placed,
    port_taken,
    ready,
    register_race,
    same_port,
    scan_background_imports,
)

PY = sys.executable
UP = [PY, "-c", "import time; print('up', flush=True); time.sleep(60)"]
NAN, INF = float("nan"), float("inf")


def a_repo(cache):
    return cache.add_model("org/model", {"config.json": {"model_type": "bert"}})
"""

FLEET = ("server_fleet", "hub_cache")
RACE = ("hub_race", "hub_cache")


def _api(id: str, given: str, *words: str, needs: str = "") -> Misuse:
    return Misuse(id, "api", given, words, ("tmp_path", "hub_cache"), needs=needs)


def _fixture(
    id: str,
    given: str,
    fixtures: tuple[str, ...],
    *words: str,
    marker: str = "",
    needs: str = "",
) -> Misuse:
    return Misuse(id, "fixture", given, words, ("tmp_path", *fixtures), marker, needs=needs)


def _marker(id: str, given: str, *words: str) -> Misuse:
    return Misuse(id, "marker", given, words)


def _option(id: str, given: str, *words: str) -> Misuse:
    return Misuse(id, "option", given, words)


def _env(id: str, given: str, *words: str, args: tuple[str, ...] = ()) -> Misuse:
    return Misuse(id, "env", given, words, args=args)


def _ini(id: str, given: str, *words: str, args: tuple[str, ...] = ()) -> Misuse:
    return Misuse(id, "ini", given, words, args=args)


def _cli(id: str, given: str, *words: str) -> Misuse:
    return Misuse(id, "cli", given, words)


TRIGGERS = [
    _api("on_access_nth_zero", "on_access(nth=0)", "nth=0", "on_access()", ">= 1"),
    _api("on_access_nth_float", "on_access(nth=1.5)", "nth=1.5", "whole number"),
    _api("on_access_hold_nan", "on_access(hold=NAN)", "hold=nan", "seconds"),
    _api("on_access_hold_inf", "on_access(hold=INF)", "hold=inf", "seconds"),
    _api("on_access_hold_negative", "on_access(hold=-1)", "hold=-1", "non-negative"),
    _api("on_access_accesses_zero", "on_access(accesses=0)", "accesses=0", ">= 1"),
    _api("after_seconds_inf", "after(INF)", "seconds=inf", "after()"),
    _api("after_seconds_text", "after('1')", "seconds='1'", "number of seconds"),
    _api("after_hold_zero", "after(1, hold=0)", "hold=0", "positive"),
    _api("chaos_gap_zero", "chaos(gap=0)", "gap=0", "positive"),
    _api("chaos_hold_nan", "chaos(hold=NAN)", "hold=nan", "chaos()"),
    _api("chaos_seed_negative", "chaos(seed=-1)", "seed=-1", "whole number"),
]

PORT_FAULTS = [
    _api("port_taken_member_negative", "port_taken(-1)", "member=-1", "member index"),
    _api("port_taken_hold_zero", "port_taken(0, hold=0)", "hold=0", "seconds > 0"),
    _api("port_taken_hold_inf", "port_taken(0, hold=INF)", "hold=inf", "port_taken()"),
    _api("port_taken_allow_miss_text", "port_taken(0, allow_miss='no')", "allow_miss='no'", "bool"),
    _api("same_port_one_member", "same_port((0, 0))", "members=(0, 0)", "two distinct"),
    _api("same_port_not_a_pair", "same_port(0)", "members=0", "same_port()"),
]

PROBES = [
    _api("http_path_relative", "ready.http('health')", "path='health'", "'/health'"),
    _api("http_status_99", "ready.http('/h', status=99)", "status=99", "HTTP status"),
    _api("http_expect_not_callable", "ready.http('/h', expect=3)", "expect=3", "callable"),
    _api("log_bad_regex", "ready.log('(')", "pattern='('", "regular expression"),
    _api("log_not_text", "ready.log(3)", "pattern=3", "ready.log()"),
    _api(
        "file_unknown_placeholder",
        "ready.file('/tmp/{nope}.ready')",
        "{nope}",
        "ready.file()",
        "{index}",
        needs="ready.file placeholders (fleet/ready.py)",
    ),
    _api("file_empty", "ready.file('')", "path=''", "ready.file()"),
    _api("call_not_callable", "ready.call(3)", "function=3", "callable"),
]

LOAD = [
    _api("cpu_load_negative", "with cpu_load(-1): pass", "processes=-1", "cpu_load()"),
    _api("cpu_load_limit_inf", "with cpu_load(1, limit=INF): pass", "limit=inf", "seconds"),
    _api("cpu_load_memory_negative", "with cpu_load(1, memory=-5): pass", "memory=-5", "bytes"),
    _api("cpu_load_cpus_text", "with cpu_load(1, cpus='0'): pass", "cpus='0'", "CPU numbers"),
    _api(
        "cpu_load_cpu_missing",
        "with cpu_load(1, cpus=[100000]): pass",
        "cpus=[100000]",
        "CPU 100000",
    ),
]

CATALOG = [
    _api("register_race_bad_name", "register_race('my race', Race)", "'my race'", "identifier"),
    _api("register_race_not_a_race", "register_race('mine', int)", "'mine'", "subclass of Race"),
    _api(
        "blob_rewrite_written_one",
        "RACES['blob_rewrite'](written=1.5)",
        "written=1.5",
        "BlobRewrite()",
    ),
    _api(
        "partial_write_written_text",
        "RACES['partial_write'](written='half')",
        "written='half'",
        "PartialWrite()",
    ),
]

CACHE = [
    _api("cache_root_int", "FakeHubCache(3)", "root=3", "FakeHubCache()"),
    _api(
        "cache_lfs_threshold_negative",
        "FakeHubCache(tmp_path / 'c', lfs_threshold=-1)",
        "lfs_threshold=-1",
        ">= 0",
    ),
    _api("add_model_empty_id", "hub_cache.add_model('', {'a.json': {}})", "repo id ''", "org/name"),
    _api("add_model_no_files", "hub_cache.add_model('org/x', {})", "files", "'org/x'"),
    _api(
        "add_model_content_object",
        "hub_cache.add_model('org/x', {'a.bin': object()})",
        "'a.bin'",
        "str or bytes",
    ),
    _api(
        "add_model_file_outside",
        "hub_cache.add_model('org/x', {'../x': '1'})",
        "'../x'",
        "without '..'",
    ),
    _api(
        "add_model_revision_empty",
        "hub_cache.add_model('org/x', {'a': '1'}, revision='')",
        "revision ''",
        "'main'",
    ),
    _api(
        "add_model_no_exist_text",
        "hub_cache.add_model('org/x', {'a': '1'}, no_exist='b.json')",
        "no_exist='b.json'",
        "list of file names",
    ),
    _api(
        "add_repo_type_unknown",
        "hub_cache.add_repo('org/x', {'a': '1'}, repo_type='spaces')",
        "'spaces'",
        "model, dataset, space",
    ),
    _api(
        "add_from_folder_missing",
        "hub_cache.add_from_folder('org/x', tmp_path / 'nothing')",
        "nothing",
        "does not exist",
    ),
    _api("add_from_folder_int", "hub_cache.add_from_folder('org/x', 3)", "folder=3", "path"),
    _api(
        "add_from_cache_missing",
        "hub_cache.add_from_cache('org/x', tmp_path / 'no-cache')",
        "no-cache",
        "hub_cache_dir",
    ),
    _api("repo_missing", "hub_cache.repo('org/none')", "org/none@main", "repos there"),
    _api(
        "repo_revision_missing",
        "a_repo(hub_cache); hub_cache.repo('org/model', 'v9')",
        "org/model@v9",
        "org/model@main",
    ),
    _api(
        "corrupt_kind_unknown",
        "hub_cache.corrupt(a_repo(hub_cache), 'config.json', 'emtpy')",
        "'emtpy'",
        "did you mean 'empty'",
    ),
    _api(
        "corrupt_file_missing",
        "hub_cache.corrupt(a_repo(hub_cache), 'tokenizer.json', 'empty')",
        "'tokenizer.json'",
        "its files: config.json",
    ),
    _api(
        "corrupt_repo_id",
        "a_repo(hub_cache); hub_cache.corrupt('org/model', 'config.json', 'empty')",
        "repo='org/model'",
        "CachedRepo",
    ),
    _api(
        "corrupt_revision_missing",
        "hub_cache.corrupt(a_repo(hub_cache), 'config.json', 'empty', revision='v2')",
        "'v2'",
        "its revisions: main",
    ),
    _api("copy_of_repo_id", "hub_cache.copy_of('org/model')", "repo='org/model'", "CachedRepo"),
    _api(
        "copy_of_twice",
        "hub_cache.copy_of(a_repo(hub_cache))",
        "org/model",
        "copy it once",
    ),
    _api("clone_root_int", "hub_cache.clone(3)", "root=3", "clone()"),
    _api(
        "pointer_file_missing",
        "a_repo(hub_cache).pointer('vocab.txt')",
        "'vocab.txt'",
        "its files: config.json",
    ),
    _api("ref_revision_empty", "a_repo(hub_cache).ref('')", "revision ''", "branch or tag"),
]

IN_PROCESS = [
    _api("fails_closed_not_callable", "assert_fails_closed('load')", "startup='load'", "callable"),
    _api(
        "fails_closed_within_inf",
        "assert_fails_closed(lambda: 1 / 0, within=INF)",
        "within=inf",
        "positive",
    ),
    _api(
        "fails_closed_within_negative",
        "assert_fails_closed(lambda: 1 / 0, within=-1)",
        "within=-1",
        "seconds",
    ),
    _api(
        "fails_closed_match_bad_regex",
        "assert_fails_closed(lambda: 1 / 0, match='(')",
        "match='('",
        "regular expression",
    ),
    _api("survives_not_callable", "assert_survives('load')", "startup='load'", "callable"),
    _api(
        "survives_race_name",
        "assert_survives(lambda: 1, race='pointer_swap')",
        "race='pointer_swap'",
        "hub_race.arm()",
    ),
    _api(
        "survives_expect_not_callable",
        "assert_survives(lambda: 1, expect=True)",
        "expect=True",
        "callable",
    ),
]

TARGETS = [
    _api(
        "detect_root_missing",
        "detect_target(root=str(tmp_path / 'machine'))",
        "root=",
        "no such folder",
    ),
    _api("detect_root_int", "detect_target(root=3)", "root=3", "detect_target()"),
]

IMPORTS = [
    _api(
        "scan_path_missing",
        "scan_background_imports(tmp_path / 'pkg')",
        "pkg",
        "no such file or folder",
    ),
    _api("scan_path_int", "scan_background_imports(3)", "path=3", "scan_background_imports()"),
    _api(
        "scan_ignore_text",
        "scan_background_imports(tmp_path, ignore='torch')",
        "ignore='torch'",
        "list of module names",
    ),
    _api(
        "scan_severity_unknown",
        "scan_background_imports(tmp_path).assert_clean('fatal')",
        "'fatal'",
        "warning, error",
    ),
    _api("import_race_module_empty", "import_race('')", "module ''", "dotted module name"),
    _api("import_race_attrs_int", "import_race('json', attrs=3)", "attrs=3", "attribute names"),
    _api("import_race_repeats_zero", "import_race('json', repeats=0)", "repeats=0", ">= 1"),
    _api(
        "import_race_order_unknown",
        "import_race('json', orders=['sideways'])",
        "'sideways'",
        "'main first'",
    ),
    _api("import_race_delay_nan", "import_race('json', delays=[NAN])", "delays[0]=nan", "seconds"),
    _api("import_race_delays_empty", "import_race('json', delays=[])", "delays=[]", "one or more"),
    _api("import_race_timeout_inf", "import_race('json', timeout=INF)", "timeout=inf", "positive"),
    _api("import_race_workers_zero", "import_race('json', workers=0)", "workers=0", ">= 1"),
    _api("import_race_env_int", "import_race('json', env={'X': 1})", "env['X']=1", "must be str"),
    _api(
        "import_race_cwd_missing",
        "import_race('json', cwd=tmp_path / 'gone')",
        "cwd=",
        "no such folder",
    ),
    _api(
        "import_race_python_missing",
        "import_race('json', python=str(tmp_path / 'python9'))",
        "python9",
        "not an executable",
    ),
    _api(
        "start_methods_startup_int",
        "check_start_methods(3)",
        "startup=3",
        "check_start_methods()",
    ),
    _api(
        "start_methods_methods_text",
        "check_start_methods([PY, '-c', 'pass'], methods='spawn')",
        "methods='spawn'",
        "['spawn']",
    ),
    _api(
        "start_methods_method_unknown",
        "check_start_methods([PY, '-c', 'pass'], methods=['spwan'])",
        "'spwan'",
        "did you mean 'spawn'",
    ),
    _api(
        "start_methods_timeout_inf",
        "check_start_methods([PY, '-c', 'pass'], timeout=INF)",
        "timeout=inf",
        "positive",
    ),
    _api(
        "start_methods_ready_bad_regex",
        "check_start_methods([PY, '-c', 'pass'], ready='(')",
        "ready='('",
        "regular expression",
    ),
    _api(
        "start_methods_env_int",
        "check_start_methods([PY, '-c', 'pass'], env={'X': 1})",
        "env['X']=1",
        "must be str",
    ),
    _api(
        "env_choices_variable_bad",
        "check_env_choices([PY, '-c', 'pass'], '1X', ['a'])",
        "'1X'",
        "environment variable name",
    ),
    _api(
        "env_choices_allowed_empty",
        "check_env_choices([PY, '-c', 'pass'], 'X', [])",
        "allowed=",
        "empty",
    ),
    _api(
        "env_choices_value_int",
        "check_env_choices([PY, '-c', 'pass'], 'X', [3])",
        "allowed[0]=3",
        "a str",
    ),
    _api(
        "env_choices_match_bad_regex",
        "check_env_choices([PY, '-c', 'pass'], 'X', ['a'], match='(')",
        "match='('",
        "regular expression",
    ),
]

LAUNCH = [
    _fixture(
        "launch_env_int",
        "server_fleet.launch(UP, ready=ready.log('up'), env={'X': 1})",
        FLEET,
        "env['X']=1",
        "must be str",
    ),
    _fixture(
        "launch_env_bytes",
        "server_fleet.launch(UP, ready=ready.log('up'), env={'X': b'1'})",
        FLEET,
        "env['X']=b'1'",
        "decode",
    ),
    _fixture(
        "launch_env_list",
        "server_fleet.launch(UP, ready=ready.log('up'), env=['X=1'])",
        FLEET,
        "env=['X=1']",
        "mapping",
    ),
    _fixture(
        "launch_env_name_int",
        "server_fleet.launch(UP, ready=ready.log('up'), env={1: 'x'})",
        FLEET,
        "variable name 1",
        "env=",
    ),
    _fixture(
        "launch_timeout_inf",
        "server_fleet.launch(UP, ready=ready.log('up'), timeout=INF)",
        FLEET,
        "timeout=inf",
        "server_fleet.launch()",
    ),
    _fixture(
        "launch_timeout_nan",
        "server_fleet.launch(UP, ready=ready.log('up'), timeout=NAN)",
        FLEET,
        "timeout=nan",
        "positive",
    ),
    _fixture(
        "launch_count_zero",
        "server_fleet.launch(UP, count=0, ready=ready.log('up'))",
        FLEET,
        "count=0",
        "a whole number from 1 to 256",
    ),
    _fixture(
        "launch_ready_text",
        "server_fleet.launch(UP, ready='up')",
        FLEET,
        "ready='up'",
        "ready.log(",
    ),
    _fixture(
        "launch_ready_not_called",
        "server_fleet.launch(UP, ready=ready.tcp)",
        FLEET,
        "ready=",
        "call it: ready.tcp(",
    ),
    _fixture(
        "launch_argv_none",
        "server_fleet.launch(None, ready=ready.log('up'))",
        FLEET,
        "argv=None",
        "list of str",
    ),
    _fixture(
        "launch_argv_empty",
        "server_fleet.launch([], ready=ready.log('up'))",
        FLEET,
        "argv=[]",
        "empty",
    ),
    _fixture(
        "launch_unknown_keyword",
        "server_fleet.launch([PY, '-c', 'pass'], cont=2, ready=ready.log('up'))",
        FLEET,
        "'cont'",
        "count",
    ),
    _fixture(
        "launch_no_ready",
        "server_fleet.launch([PY, '-c', 'pass'], count=2)",
        FLEET,
        "needs ready=",
        "ready.http()",
    ),
    _fixture(
        "explore_writer_takes_no_warm",
        "server_fleet.explore_writer([PY, '-c', 'pass'], [PY, '-c', 'pass'], warm=True,"
        " ready=ready.log('up'))",
        FLEET,
        "'warm'",
        "timeout",
    ),
    _fixture(
        "launch_argv_int",
        "server_fleet.launch([PY, '-m', 'http.server', 8000], ready=ready.tcp())",
        FLEET,
        "argv[3]=8000",
        "a str",
    ),
    _fixture(
        "launch_cwd_missing",
        "server_fleet.launch(UP, ready=ready.log('up'), cwd=tmp_path / 'app')",
        FLEET,
        "cwd=",
        "no such folder",
    ),
    _fixture(
        "launch_cwd_file",
        "(tmp_path / 'a.txt').write_text('');"
        " server_fleet.launch(UP, ready=ready.log('up'), cwd=tmp_path / 'a.txt')",
        FLEET,
        "cwd=",
        "expected a folder",
    ),
    _fixture(
        "launch_cache_path",
        "server_fleet.launch(UP, ready=ready.log('up'), cache=str(tmp_path))",
        FLEET,
        "cache=",
        "FakeHubCache",
    ),
    _fixture(
        "launch_ports_too_many",
        "server_fleet.launch(UP + ['{port}'], ready=ready.log('up'), ports=[20001, 20002])",
        FLEET,
        "ports=[20001, 20002]",
        "count=1",
    ),
    _fixture(
        "launch_ports_text",
        "server_fleet.launch(UP + ['{port}'], ready=ready.log('up'), ports='8000')",
        FLEET,
        "ports='8000'",
        "list of port numbers",
    ),
    _fixture(
        "launch_port_out_of_range",
        "server_fleet.launch(UP + ['{port}'], ready=ready.log('up'), ports=[70000])",
        FLEET,
        "ports[0]=70000",
        "65535",
    ),
    _fixture(
        "launch_workers_zero",
        "server_fleet.launch(UP, ready=ready.log('up'), workers=0)",
        FLEET,
        "workers=0",
        "a whole number from 1 to 256",
    ),
    _fixture(
        "launch_faults_text",
        "server_fleet.launch(UP, ready=ready.log('up'), faults='port_taken')",
        FLEET,
        "faults='port_taken'",
        "port_taken(member=k)",
    ),
    _fixture(
        "launch_fault_without_port",
        "server_fleet.launch(UP, ready=ready.log('up'), faults=[port_taken(0)])",
        FLEET,
        "port_taken(member=0",
        "put {port} in the command",
    ),
    _fixture(
        "launch_fault_member_missing",
        "server_fleet.launch(UP + ['{port}'], ready=ready.log('up'), faults=[port_taken(3)])",
        FLEET,
        "member 3",
        "from 0 to 0",
    ),
    _fixture(
        "launch_placeholder_unknown",
        "server_fleet.launch(UP + ['--host={host}'], ready=ready.log('up'))",
        FLEET,
        "{host}",
        "{port}, {index}, {count}",
    ),
]

EXPLORE = [
    _fixture(
        "explore_mode_unknown",
        "server_fleet.explore(UP, 'pointer_swap', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'), mode='fast')",
        FLEET,
        "mode='fast'",
        "'sequential'",
    ),
    _fixture(
        "explore_hold_nan",
        "server_fleet.explore(UP, 'pointer_swap', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'), hold=NAN)",
        FLEET,
        "hold=nan",
        "seconds",
    ),
    _fixture(
        "explore_points_zero",
        "server_fleet.explore(UP, 'pointer_swap', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'), points=[0])",
        FLEET,
        "points[0]=0",
        "access point",
    ),
    _fixture(
        "explore_prune_word",
        "server_fleet.explore(UP, 'pointer_swap', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'), prune='yes')",
        FLEET,
        "prune='yes'",
        "False (run every point, the default)",
    ),
    _fixture(
        "explore_race_unknown",
        "server_fleet.explore(UP, 'pointer_swp', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'))",
        FLEET,
        "'pointer_swp'",
        "did you mean 'pointer_swap'",
    ),
    _fixture(
        "explore_file_missing",
        "server_fleet.explore(UP, 'pointer_swap', a_repo(hub_cache), 'model.bin',"
        " ready=ready.log('up'))",
        FLEET,
        "'model.bin'",
        "its files: config.json",
    ),
    _fixture(
        "explore_timeout_inf",
        "server_fleet.explore(UP, 'pointer_swap', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'), timeout=INF)",
        FLEET,
        "timeout=inf",
        "server_fleet.explore()",
    ),
    _fixture(
        "explore_env_int",
        "server_fleet.explore(UP, 'pointer_swap', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'), env={'PORT': 8000})",
        FLEET,
        "env['PORT']=8000",
        "must be str",
    ),
    _fixture(
        "explore_stale_lock",
        "server_fleet.explore(UP, 'stale_lock', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'))",
        FLEET,
        "'stale_lock'",
        "stale=[...]",
    ),
]

RACES_ARMED = [
    _fixture(
        "arm_repo_id",
        "hub_race.arm('pointer_swap', 'org/model', 'config.json')",
        RACE,
        "CachedRepo",
        "not str",
    ),
    _fixture(
        "arm_file_missing",
        "hub_race.arm('pointer_swap', a_repo(hub_cache), 'weights.bin')",
        RACE,
        "'weights.bin'",
        "its files: config.json",
    ),
    _fixture(
        "arm_trigger_text",
        "hub_race.arm('pointer_swap', a_repo(hub_cache), 'config.json', trigger='on_access')",
        RACE,
        "trigger='on_access'",
        "on_access(...)",
    ),
    _fixture(
        "arm_allow_miss_text",
        "hub_race.arm('pointer_swap', a_repo(hub_cache), 'config.json', allow_miss='yes')",
        RACE,
        "allow_miss='yes'",
        "True or False",
    ),
    _fixture(
        "arm_revision_missing",
        "hub_race.arm('pointer_swap', a_repo(hub_cache), 'config.json', revision='v9')",
        RACE,
        "'v9'",
        "its revisions: main",
    ),
    _fixture(
        "arm_race_unknown",
        "hub_race.arm('ref_rewirte', a_repo(hub_cache), 'config.json')",
        RACE,
        "'ref_rewirte'",
        "did you mean 'ref_rewrite'",
    ),
    _fixture(
        "arm_filename_none",
        "hub_race.arm('pointer_swap', a_repo(hub_cache), None)",
        RACE,
        "filename=None",
        "hub_race.arm()",
    ),
    _fixture(
        "arm_path_outside",
        "hub_race.arm_path('file_replace', '/etc/hostname')",
        ("hub_race", "shared_dir"),
        "/etc/hostname",
        "Allowed roots",
    ),
    _fixture(
        "arm_path_hub_race",
        "hub_race.arm_path('pointer_swap', shared_dir / 'x.json')",
        ("hub_race", "shared_dir"),
        "'pointer_swap'",
        "hub_race.arm(",
    ),
    _fixture(
        "arm_path_missing_file",
        "hub_race.arm_path('file_replace', shared_dir / 'kernel.json')",
        ("hub_race", "shared_dir"),
        "kernel.json",
        "does not exist",
    ),
    _fixture(
        "arm_path_int",
        "hub_race.arm_path('file_replace', 3)",
        ("hub_race", "shared_dir"),
        "needs a path",
        "not int",
    ),
    _fixture(
        "stale_lock_soft_text",
        "hub_race.stale_lock(shared_dir / 'x.lock', soft='yes')",
        ("hub_race", "shared_dir"),
        "soft='yes'",
        "True or False",
    ),
    _fixture(
        "hub_explore_startup_text",
        "hub_race.explore('pointer_swap', a_repo(hub_cache), 'config.json', 'load')",
        RACE,
        "startup='load'",
        "callable",
    ),
    _fixture(
        "hub_explore_repo_id",
        "hub_race.explore('pointer_swap', 'org/model', 'config.json', lambda: None)",
        RACE,
        "CachedRepo",
        "hub_race.explore()",
    ),
    _fixture(
        "hub_explore_hold_inf",
        "hub_race.explore('pointer_swap', a_repo(hub_cache), 'config.json', lambda: None,"
        " hold=INF)",
        RACE,
        "hold=inf",
        "seconds",
    ),
    _fixture(
        "hub_explore_points_text",
        "hub_race.explore('pointer_swap', a_repo(hub_cache), 'config.json', lambda: None,"
        " points='1')",
        RACE,
        "points='1'",
        "list of access point numbers",
    ),
    _fixture(
        "corrupt_shared_cache",
        "repo = shared_hub_cache.add_model('org/shared', {'config.json': {}});"
        " shared_hub_cache.corrupt(repo, 'config.json', 'empty')",
        ("shared_hub_cache",),
        "org/shared@main",
        "hub_cache.copy_of(repo)",
    ),
    _fixture(
        "arm_shared_cache",
        "repo = shared_hub_cache.add_model('org/shared', {'config.json': {}});"
        " hub_race.arm('pointer_swap', repo, 'config.json')",
        ("hub_race", "shared_hub_cache"),
        "org/shared@main",
        "shared_hub_cache",
    ),
]

OTHER_FIXTURES = [
    _fixture(
        "import_race_fixture_pythonpath_int",
        "import_race('json', pythonpath=3)",
        ("import_race",),
        "pythonpath=3",
        "folders",
    ),
    _fixture(
        "start_methods_fixture_pythonpath_int",
        "start_methods.check([PY, '-c', 'pass'], pythonpath=3)",
        ("start_methods",),
        "pythonpath=3",
        "folders",
    ),
    _fixture(
        "child_runtime_watch_int",
        "child_runtime.watch(3)",
        ("child_runtime",),
        "watch",
        "3",
        needs="child_runtime.watch() checks its argument (runtime/controller.py)",
    ),
    _fixture(
        "child_runtime_expect_pid_text",
        "child_runtime.expect('1234', 'server')",
        ("child_runtime",),
        "expect",
        "'1234'",
        needs="child_runtime.expect() checks its pid (runtime/controller.py)",
    ),
]

ORDER = [
    _fixture(
        "case_check_before_apply",
        "startup_case.check(None)",
        ("startup_case",),
        "startup_case.check()",
        "before apply(",
        marker="@pytest.mark.startup_races(transient=['pointer_swap'])",
    ),
    _fixture(
        "case_check_server_fleet",
        "startup_case.apply(a_repo(hub_cache), 'config.json'); startup_case.check(server_fleet)",
        ("startup_case", *FLEET),
        "fleet=server_fleet",
        "server_fleet.launch(...) returned",
        marker="@pytest.mark.startup_races(corrupt=['empty'])",
    ),
    _fixture(
        "case_check_fleet_launched_first",
        "fleet = server_fleet.launch(UP, ready=ready.log('up'));"
        " startup_case.apply(a_repo(hub_cache), 'config.json'); startup_case.check(fleet)",
        ("startup_case", *FLEET),
        "launched before the case was applied",
        "apply(...) first",
        marker="@pytest.mark.startup_races(corrupt=['empty'])",
    ),
    _fixture(
        "case_apply_twice",
        "repo = a_repo(hub_cache); startup_case.apply(repo, 'config.json');"
        " startup_case.apply(repo, 'config.json')",
        ("startup_case", "hub_cache"),
        "corrupt-empty",
        "already applied",
        marker="@pytest.mark.startup_races(corrupt=['empty'])",
    ),
    _fixture(
        "case_apply_trigger_to_corruption",
        "startup_case.apply(a_repo(hub_cache), 'config.json', trigger=on_access())",
        ("startup_case", "hub_cache"),
        "trigger=OnAccess(",
        "takes no trigger",
        marker="@pytest.mark.startup_races(corrupt=['empty'])",
    ),
    _fixture(
        "case_apply_filename_missing",
        "startup_case.apply(a_repo(hub_cache))",
        ("startup_case", "hub_cache"),
        "apply(repo, filename)",
        "not None",
        marker="@pytest.mark.startup_races(transient=['pointer_swap'])",
    ),
    _fixture(
        "fleet_assert_after_stop",
        "fleet = server_fleet.launch(UP, ready=ready.log('up')); fleet.stop();"
        " fleet.assert_all_ready()",
        FLEET,
        "assert_all_ready",
        "stop",
        needs="Fleet.assert_all_ready() after stop() (fleet/fleet.py)",
    ),
    _fixture(
        "fleet_assert_all_failed_bad_regex",
        "fleet = server_fleet.launch([PY, '-c', 'raise SystemExit(3)'], ready=ready.log('up'));"
        " fleet.assert_all_failed(match='(')",
        FLEET,
        "match=",
        "'('",
        needs="Fleet.assert_all_failed() checks match= (fleet/fleet.py)",
    ),
]

MARKERS = [
    _marker(
        "startup_races_twice",
        "@pytest.mark.startup_races(transient=['pointer_swap'])\n"
        "@pytest.mark.startup_races(corrupt=['empty'])\n"
        "def test_x(startup_case):\n    pass\n",
        "2 startup_races markers",
        "corrupt=['empty']",
        "transient=['pointer_swap']",
    ),
    _marker(
        "startup_races_class_and_function",
        "@pytest.mark.startup_races(corrupt=['empty'])\n"
        "class TestServer:\n"
        "    @pytest.mark.startup_races(transient=['pointer_swap'])\n"
        "    def test_x(self, startup_case):\n        pass\n",
        "on class TestServer",
        "on the function",
        "a test takes one",
    ),
    _marker(
        "startup_races_module_and_function",
        "pytestmark = pytest.mark.startup_races(stale=['stale_lock'])\n\n"
        "@pytest.mark.startup_races(corrupt=['empty'])\n"
        "def test_x(startup_case):\n    pass\n",
        "on module",
        "stale=['stale_lock']",
    ),
    _marker(
        "startup_races_transient_text",
        "@pytest.mark.startup_races(transient='pointer_swap')\n"
        "def test_x(startup_case):\n    pass\n",
        "transient='pointer_swap'",
        "list of names or 'all'",
    ),
    _marker(
        "startup_races_hold_nan",
        "@pytest.mark.startup_races(transient=['pointer_swap'], hold=float('nan'))\n"
        "def test_x(startup_case):\n    pass\n",
        "hold=nan",
        "seconds",
    ),
    _marker(
        "startup_races_race_unknown",
        "@pytest.mark.startup_races(transient=['pointer_swp'])\n"
        "def test_x(startup_case):\n    pass\n",
        "'pointer_swp'",
        "did you mean 'pointer_swap'",
    ),
    _marker(
        "startup_races_keyword_unknown",
        "@pytest.mark.startup_races(races=['pointer_swap'])\ndef test_x(startup_case):\n    pass\n",
        "'races'",
        "transient=",
    ),
    _marker(
        "startup_races_explore_text",
        "@pytest.mark.startup_races(transient=['pointer_swap'], explore='yes')\n"
        "def test_x(startup_case):\n    pass\n",
        "explore='yes'",
        "'sequential'",
    ),
    _marker(
        "startup_races_without_fixture",
        "@pytest.mark.startup_races(transient=['pointer_swap'])\ndef test_x():\n    pass\n",
        "startup_case fixture",
        "test_x",
    ),
    _marker(
        "startup_races_stale_transient",
        "@pytest.mark.startup_races(stale=['pointer_swap'])\ndef test_x(startup_case):\n    pass\n",
        "'pointer_swap'",
        "stale_lock, stale_soft_lock",
    ),
    _marker(
        "startup_races_trigger_placed",
        "@pytest.mark.startup_races(transient=['pointer_swap'], trigger=placed())\n"
        "def test_x(startup_case):\n    pass\n",
        "trigger=Placed()",
        "on_access(...)",
    ),
    _marker(
        "startup_races_positional",
        "@pytest.mark.startup_races('pointer_swap')\ndef test_x(startup_case):\n    pass\n",
        "keyword arguments only",
        "transient=[...]",
    ),
    _marker(
        "startup_races_empty",
        "@pytest.mark.startup_races()\ndef test_x(startup_case):\n    pass\n",
        "names no case",
        "transient=[...]",
    ),
    _marker(
        "target_marker_argument",
        "@pytest.mark.cpu(3)\ndef test_x():\n    pass\n",
        "@pytest.mark.cpu(3)",
        "take no arguments",
    ),
]

OPTIONS = [
    _option(
        "timeout_nan", "--startup-guard-timeout=nan", "--startup-guard-timeout 'nan'", "positive"
    ),
    _option(
        "timeout_inf", "--startup-guard-timeout=inf", "--startup-guard-timeout 'inf'", "seconds"
    ),
    _option("timeout_zero", "--startup-guard-timeout=0", "--startup-guard-timeout '0'", "positive"),
    _option("seed_negative", "--startup-guard-seed=-1", "--startup-guard-seed '-1'", "4294967295"),
    _option("stress_zero", "--startup-guard-stress=0", "--startup-guard-stress '0'", "from 1"),
    _option(
        "explore_point_zero",
        "--startup-guard-explore-point=0",
        "--startup-guard-explore-point '0'",
        "access point",
    ),
    _option(
        "explore_point_unused",
        "--startup-guard-explore-point=2",
        "--startup-guard-explore-point=2",
        "none of the 1 collected test(s) explores",
    ),
    _option("target_unknown", "--startup-target=tpu", "--startup-target 'tpu'", "auto, cpu"),
    _option(
        "artifacts_is_a_file",
        "--startup-guard-artifacts=a_file.txt",
        "--startup-guard-artifacts 'a_file.txt'",
        "is a file",
    ),
    _option(
        "artifacts_under_a_file",
        "--startup-guard-artifacts=a_file.txt/artifacts",
        "--startup-guard-artifacts 'a_file.txt/artifacts'",
        "above it",
        "a_file.txt is a file, not a folder",
    ),
    _option(
        "report_folder_missing",
        "--startup-guard-report=reports/startup.json",
        "--startup-guard-report 'reports/startup.json'",
        "reports does not exist",
    ),
    _option(
        "report_is_a_folder",
        "--startup-guard-report=a_folder",
        "--startup-guard-report 'a_folder'",
        "is a folder",
    ),
    _option(
        "html_is_a_folder",
        "--startup-guard-html=a_folder",
        "--startup-guard-html 'a_folder'",
        "is a folder",
    ),
    _option(
        "html_folder_is_a_file",
        "--startup-guard-html=a_file.txt/startup.html",
        "--startup-guard-html 'a_file.txt/startup.html'",
        "is a file, not a folder",
    ),
    _option(
        "report_and_html_one_file",
        "--startup-guard-report=out.txt --startup-guard-html=out.txt",
        "--startup-guard-html 'out.txt'",
        "also --startup-guard-report",
    ),
    _option("report_empty", "--startup-guard-report=", "--startup-guard-report ''", "a path"),
]

ENVIRONMENT = [
    _env(
        "env_timeout_negative", "STARTUP_GUARD_TIMEOUT=-3", "STARTUP_GUARD_TIMEOUT '-3'", "positive"
    ),
    _env("env_seed_text", "STARTUP_GUARD_SEED=abc", "STARTUP_GUARD_SEED 'abc'", "a run seed"),
    _env(
        "env_strict_reruns_maybe",
        "STARTUP_GUARD_STRICT_RERUNS=maybe",
        "STARTUP_GUARD_STRICT_RERUNS 'maybe'",
        "true or false",
    ),
    _env(
        "env_explore_all_maybe",
        "STARTUP_GUARD_EXPLORE_ALL=maybe",
        "STARTUP_GUARD_EXPLORE_ALL 'maybe'",
        "true or false",
    ),
    _env("env_target_gpu", "STARTUP_GUARD_TARGET=gpu", "STARTUP_GUARD_TARGET 'gpu'", "cuda, rocm"),
    _env("env_stress_fraction", "STARTUP_GUARD_STRESS=1.5", "STARTUP_GUARD_STRESS '1.5'", "from 1"),
    _env(
        "env_explore_point_unused",
        "STARTUP_GUARD_EXPLORE_POINT=3",
        "STARTUP_GUARD_EXPLORE_POINT=3",
        "explores",
    ),
    _env(
        "env_report_folder_missing",
        "STARTUP_GUARD_REPORT=out/report.json",
        "STARTUP_GUARD_REPORT 'out/report.json'",
        "does not exist",
    ),
]

INI = [
    _ini(
        "ini_timeout_text",
        "startup_guard_timeout = soon",
        "startup_guard_timeout 'soon'",
        "tox.ini",
    ),
    _ini(
        "ini_allow_reruns_maybe",
        "startup_guard_allow_reruns = maybe",
        "startup_guard_allow_reruns 'maybe'",
        "true or false",
    ),
    _ini(
        "ini_per_target_timeout",
        "startup_guard_timeout_rocm = -1",
        "startup_guard_timeout_rocm '-1'",
        "positive",
        args=("--startup-target=rocm",),
    ),
    _ini(
        "ini_html_folder",
        "startup_guard_html = a_folder",
        "startup_guard_html 'a_folder'",
        "is a folder",
    ),
]

CLI = [
    _cli(
        "merge_output_folder", "merge empty.json -o a_folder", "-o/--output", "a_folder is a folder"
    ),
    _cli(
        "merge_output_folder_missing",
        "merge empty.json -o out/matrix.html",
        "-o/--output",
        "folder out does not exist",
    ),
    _cli("merge_output_is_input", "merge empty.json -o empty.json", "empty.json", "also a REPORT"),
    _cli("merge_format_unknown", "merge empty.json --format pdf", "--format", "'pdf'"),
    _cli("merge_not_json", "merge bad.json", "bad.json", "not JSON"),
    _cli("merge_report_missing", "merge missing.json", "missing.json", "does not exist"),
    _cli("merge_report_folder", "merge a_folder", "a_folder", "cannot read"),
    _cli("merge_no_report", "merge", "REPORT", "required"),
    _cli("command_unknown", "frobnicate", "'frobnicate'", "merge"),
]

CASES: list[Misuse] = [
    *TRIGGERS,
    *PORT_FAULTS,
    *PROBES,
    *LOAD,
    *CATALOG,
    *CACHE,
    *IN_PROCESS,
    *TARGETS,
    *IMPORTS,
    *LAUNCH,
    *EXPLORE,
    *RACES_ARMED,
    *OTHER_FIXTURES,
    *ORDER,
    *MARKERS,
    *OPTIONS,
    *ENVIRONMENT,
    *INI,
    *CLI,
]

# Parts of the API keep their cases in files of their own (``misuse_cases_<part>.py``, each a
# list ``CASES``): read here, so that test_misuse.py runs them with the rest.
for _part in (
    "ports",
    "fs_errors",
    "locks",
    "rebuild",
    "order",
    "native",
    "remote",
    "writer",
    "warm",
    "boundary",
    "report",
    "lifetimes",
):
    try:
        _module = __import__(f"misuse_cases_{_part}")
    except ModuleNotFoundError as error:
        if error.name != f"misuse_cases_{_part}":
            raise
        continue
    CASES.extend(_module.CASES)


def cases(where: Where | None = None) -> list[Misuse]:
    """Every case, or those given ``where``."""
    return [case for case in CASES if where is None or case.where == where]
