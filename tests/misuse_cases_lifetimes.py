"""Misuses of markers wherever pytest puts them, of fixture objects past their test, of output
paths that are one file, and of the content and names a fake repo is built from, as data for
test_misuse.py."""

from __future__ import annotations

from misuse_cases import Misuse, _api, _env, _fixture, _ini, _marker, _option

CALLS = "test_misuse_calls.py"
REMOTE = ("hub_remote",)
FAILS_NAMING_CONFIG = "[PY, '-c', \"import sys; sys.exit('config.json is empty')\"]"


def _kept(id: str, fixture: str, use: str, asks: str = "", marker: str = "") -> Misuse:
    """A test keeps ``fixture``'s object in a global; the case's test, run after it, calls
    ``use`` on it: the error names the fixture and the test it belonged to."""
    keeper = f"test_{id}__keeps"
    before = (
        f"{marker}\n" if marker else ""
    ) + f"def {keeper}({asks or fixture}):\n    globals()['KEPT_{id}'] = {fixture}\n"
    return Misuse(
        id,
        "fixture",
        f"KEPT_{id}.{use}",
        (f"{fixture} of {CALLS}::{keeper}", "after that test ended"),
        ("tmp_path",),
        before=before,
    )


def _in_param(mark: str) -> str:
    """A test file whose only test gets ``mark`` through ``pytest.param(..., marks=...)``."""
    return (
        f"@pytest.mark.parametrize('n', [pytest.param(1, marks=pytest.mark.{mark})])\n"
        "def test_x(n):\n    pass\n"
    )


MARKERS = [
    _marker(
        "startup_races_in_param_misspelt",
        _in_param("startup_races(transient=['pointer_swp'])"),
        "'pointer_swp'",
        "did you mean 'pointer_swap'",
        "pytest.param",
    ),
    _marker(
        "startup_races_in_param",
        _in_param("startup_races(corrupt=['empty'])"),
        "pytest.param",
        "on the function, its class or its module",
    ),
    _marker(
        "startup_races_nested_list",
        "@pytest.mark.startup_races(transient=[['pointer_swap']])\n"
        "def test_x(startup_case):\n    pass\n",
        "transient=[['pointer_swap']]",
        "['pointer_swap'] is a list",
        "race names",
    ),
    _marker(
        "startup_races_dict_in_list_on_class",
        "@pytest.mark.startup_races(corrupt=[{'empty': 1}])\n"
        "class TestServer:\n"
        "    def test_x(self, startup_case):\n        pass\n",
        "corrupt=[{'empty': 1}]",
        "{'empty': 1} is a dict",
        "test_marker_startup_races_dict_in_list_on_class.py::TestServer::test_x",
    ),
    _marker(
        "startup_races_set_in_list_on_module",
        "pytestmark = pytest.mark.startup_races(stale=[{'stale_lock'}])\n\n"
        "def test_x(startup_case):\n    pass\n",
        "stale=[{'stale_lock'}]",
        "is a set",
    ),
    _marker(
        "startup_races_nested_in_param",
        _in_param("startup_races(rebuild=[[]])"),
        "rebuild=[[]]",
        "[] is a list",
    ),
    _marker(
        "startup_races_none_in_list",
        "@pytest.mark.startup_races(transient=['pointer_swap', None])\n"
        "def test_x(startup_case):\n    pass\n",
        "None is a NoneType",
        "race names",
    ),
    _marker(
        "target_marker_argument_in_param",
        _in_param("cuda('x')"),
        "@pytest.mark.cuda('x')",
        "take no arguments",
    ),
    _marker(
        "target_marker_argument_on_class",
        "@pytest.mark.cpu('x')\nclass TestServer:\n    def test_x(self):\n        pass\n",
        "@pytest.mark.cpu('x')",
        "take no arguments",
    ),
    _marker(
        "target_marker_argument_on_module",
        "pytestmark = pytest.mark.rocm(gpus=2)\n\ndef test_x():\n    pass\n",
        "@pytest.mark.rocm(gpus=2)",
        "take no arguments",
    ),
]

OTHER_TARGET_INI = [
    _ini(
        "per_target_timeout_of_another_target",
        "startup_guard_timeout_rocm = soon",
        "startup_guard_timeout_rocm 'soon'",
        "positive number of seconds",
        args=("--startup-target=cpu",),
    ),
    _ini(
        "per_target_seed_of_another_target",
        "startup_guard_seed_cuda = -3",
        "startup_guard_seed_cuda '-3'",
        "run seed",
        args=("--startup-target=cpu",),
    ),
    _ini(
        "per_target_flag_of_another_target",
        "startup_guard_strict_reruns_cpu = maybe",
        "startup_guard_strict_reruns_cpu 'maybe'",
        "true or false",
        args=("--startup-target=cuda",),
    ),
]

SAME_FILE = [
    _option(
        "html_is_the_report_through_dotdot",
        "--startup-guard-report=empty.json --startup-guard-html=a_folder/../empty.json",
        "--startup-guard-html 'a_folder/../empty.json'",
        "--startup-guard-report 'empty.json'",
    ),
    _option(
        "html_is_the_report_through_a_link",
        "--startup-guard-report=empty.json --startup-guard-html=a_link.json",
        "--startup-guard-html 'a_link.json'",
        "--startup-guard-report 'empty.json'",
    ),
    _option(
        "artifacts_is_the_report",
        "--startup-guard-report=out --startup-guard-artifacts=a_folder/../out",
        "--startup-guard-artifacts 'a_folder/../out'",
        "--startup-guard-report 'out'",
    ),
    _env(
        "html_env_is_the_report_option",
        "STARTUP_GUARD_HTML=a_folder/../empty.json",
        "STARTUP_GUARD_HTML 'a_folder/../empty.json'",
        "--startup-guard-report 'empty.json'",
        args=("--startup-guard-report=empty.json",),
    ),
]

LIFETIMES = [
    _kept("kept_hub_cache", "hub_cache", "add_model('org/x', {'a.json': {}})"),
    _kept("kept_hub_race", "hub_race", "arm('pointer_swap', 'org/x', 'config.json')"),
    _kept("kept_server_fleet", "server_fleet", "launch(UP, ready=ready.log('up'))"),
    _kept("kept_child_runtime", "child_runtime", "watch('.')"),
    _kept("kept_import_race", "import_race", "__call__('json')"),
    _kept("kept_start_methods", "start_methods", "env_choices(UP, 'X', ['a'])"),
    _kept("kept_hub_remote", "hub_remote", "add_model('acme/tiny', {'config.json': {}})"),
    _kept(
        "kept_startup_case",
        "startup_case",
        "apply(FakeHubCache(tmp_path / 'c').add_model('org/x', {'config.json': {}}), 'config.json')",
        marker="@pytest.mark.startup_races(corrupt=['empty'])",
    ),
    _fixture(
        "case_checked_twice",
        "startup_case.apply(a_repo(hub_cache), 'config.json');"
        f" fleet = server_fleet.launch({FAILS_NAMING_CONFIG}, count=1, ready=ready.log('up'));"
        " startup_case.check(fleet); startup_case.check(fleet)",
        ("startup_case", "server_fleet", "hub_cache"),
        "startup_case.check() of case corrupt-empty",
        "a case is checked once",
        marker="@pytest.mark.startup_races(corrupt=['empty'])",
    ),
]


def _add(id: str, files: str, *words: str, extra: str = "") -> Misuse:
    return _api(id, f"hub_cache.add_model('org/x', {files}{extra})", *words)


CONTENT = [
    _add(
        "content_object_in_json",
        "{'config.json': {'a': object()}}",
        "'config.json'",
        "['a']",
        "strict JSON",
    ),
    _add("content_set_in_json", "{'config.json': {'a': {1, 2}}}", "['a']", "a set"),
    _add("content_nan_in_json", "{'config.json': {'a': NAN}}", "['a']", "nan", "strict JSON"),
    _add("content_inf_in_list", "{'config.json': {'a': [1, -INF]}}", "['a'][1]", "-inf"),
    _add("content_mixed_keys", "{'config.json': {1: 'x', 'b': 2}}", "key 1", "string keys"),
    _add("content_int_key", "{'config.json': {'m': {2: 'x'}}}", "['m']", "key 2"),
    _add("content_bytes_in_json", "{'config.json': {'a': b'x'}}", "['a']", "bytes"),
    _api(
        "content_circular",
        "d = {}; d['d'] = d; hub_cache.add_model('org/x', {'config.json': d})",
        "'config.json'",
        "['d']",
        "refers to itself",
    ),
    _add(
        "content_too_deep",
        "{'c.json': __import__('functools').reduce(lambda v, _: [v], range(100000), [])}",
        "'c.json'",
        "nested deeper than",
    ),
    _add("content_lone_surrogate", "{'a.txt': 'x\\ud800'}", "'a.txt'", "UTF-8"),
    _add("name_with_nul", "{'a\\x00b.json': '1'}", "'a\\x00b.json'", "NUL"),
    _add("name_part_too_long", "{'d/' + 'a' * 300: '1'}", "255 bytes", "'d/aaa"),
    _add("name_file_and_folder", "{'a': '1', 'a/b.json': '2'}", "'a'", "'a/b.json'", "a folder"),
    _add("name_twice_once_written", "{'a/b': '1', 'a//b': '2'}", "'a//b'", "'a/b'", "same file"),
    _add("name_control_character", "{'a\\nb': '1'}", "'a\\nb'", "control character"),
    _add("revision_with_space", "{'a': '1'}", "revision 'v 1'", "branch or tag", extra=", 'v 1'"),
    _add("revision_with_nul", "{'a': '1'}", "'v\\x001'", "branch or tag", extra=", 'v\\x001'"),
    _add("revision_too_long", "{'a': '1'}", "255 bytes", "branch or tag", extra=", 'v' * 300"),
    _add("revision_dot_lock", "{'a': '1'}", "'x.lock'", "'.lock'", extra=", 'x.lock'"),
    _add(
        "no_exist_with_nul",
        "{'a': '1'}",
        "'b\\x00'",
        "NUL",
        extra=", no_exist=['b\\x00']",
    ),
    _fixture(
        "remote_content_nan",
        "hub_remote.add_model('acme/tiny', {'config.json': {'a': [NAN]}})",
        REMOTE,
        "'config.json'",
        "['a'][0]",
        "hub_remote.add_model()",
    ),
    _fixture(
        "remote_push_object",
        "hub_remote.add_model('acme/tiny', {'config.json': {}});"
        " hub_remote.push('acme/tiny', {'b.json': {'k': object()}})",
        REMOTE,
        "'b.json'",
        "['k']",
        "hub_remote.push()",
    ),
    _fixture(
        "remote_push_folder_over_file",
        "hub_remote.add_model('acme/tiny', {'config.json': {}});"
        " hub_remote.push('acme/tiny', {'config.json/x': '1'})",
        REMOTE,
        "'config.json'",
        "'config.json/x'",
        "a folder",
    ),
    _fixture(
        "remote_revision_with_colon",
        "hub_remote.add_model('acme/tiny', {'config.json': {}}, revision='a:b')",
        REMOTE,
        "'a:b'",
        "branch or tag",
    ),
]

CASES: list[Misuse] = [*MARKERS, *OTHER_TARGET_INI, *SAME_FILE, *LIFETIMES, *CONTENT]
