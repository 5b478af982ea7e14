"""Misuses of the loopback hub (``hub_remote``) and of the faults on its wire, as data for
test_misuse.py."""

from __future__ import annotations

from misuse_cases import Misuse, _api, _fixture

REMOTE = ("hub_remote",)
GUARD = "__import__('pytest_startup_guard')"
ADDED = "hub_remote.add_model('acme/tiny', {'config.json': {}})"

CASES: list[Misuse] = [
    _fixture(
        "remote_push_to_a_repo_never_added",
        "hub_remote.push('acme/none', {'config.json': {}})",
        REMOTE,
        "repo_id='acme/none'",
        "hub_remote.push()",
        "add_model",
    ),
    _fixture(
        "remote_push_to_an_unknown_branch",
        f"({ADDED}, hub_remote.push('acme/tiny', {{'a.json': {{}}}}, branch='v2'))",
        REMOTE,
        "branch='v2'",
        "revision='v2'",
    ),
    _fixture(
        "remote_push_deletes_an_unknown_file",
        f"({ADDED}, hub_remote.push('acme/tiny', {{}}, delete=['b.json']))",
        REMOTE,
        "delete=['b.json']",
        "its files: config.json",
    ),
    _fixture(
        "remote_file_name_with_dotdot",
        "hub_remote.add_model('acme/tiny', {'../config.json': {}})",
        REMOTE,
        "'../config.json'",
        "hub_remote.add_model()",
        "without '..'",
    ),
    _fixture(
        "remote_file_name_absolute",
        "hub_remote.add_model('acme/tiny', {'/etc/config.json': 'x'})",
        REMOTE,
        "'/etc/config.json'",
        "leading '/'",
    ),
    _fixture(
        "remote_bad_repo_id",
        "hub_remote.add_model('acme--x/tiny', {'config.json': {}})",
        REMOTE,
        "'acme--x/tiny'",
        "hub_remote.add_model()",
        "'org/name'",
    ),
    _fixture(
        "remote_files_not_a_mapping",
        "hub_remote.add_model('acme/tiny', ['config.json'])",
        REMOTE,
        "files=['config.json']",
        "mapping of file name to content",
    ),
    _fixture(
        "remote_same_branch_other_files",
        f"({ADDED}, hub_remote.add_model('acme/tiny', {{'config.json': {{'a': 1}}}}))",
        REMOTE,
        "acme/tiny@main exists with other files",
        "hub_remote.push(",
    ),
    _fixture(
        "remote_assert_cache_whole_unknown_repo",
        "hub_remote.assert_cache_whole('acme/none')",
        REMOTE,
        "repo_id='acme/none'",
        "assert_cache_whole()",
        "it serves: nothing",
    ),
    _fixture(
        "remote_inject_not_a_fault",
        "hub_remote.inject('slow')",
        REMOTE,
        "'slow'",
        "hub_remote.inject()",
        "slow_body",
    ),
    _api(
        "remote_server_error_not_5xx",
        f"{GUARD}.server_error(status=404)",
        "status=404",
        "server_error()",
        "from 500 to 599",
    ),
    _api(
        "remote_drop_negative_bytes",
        f"{GUARD}.drop_connection('model.safetensors', after_bytes=-1)",
        "after_bytes=-1",
        "drop_connection()",
        ">= 0",
    ),
    _api(
        "remote_slow_body_nan_delay",
        f"{GUARD}.slow_body('model.safetensors', delay=NAN)",
        "delay=nan",
        "slow_body()",
        "seconds",
    ),
    _api(
        "remote_slow_body_zero_chunk",
        f"{GUARD}.slow_body('model.safetensors', chunk=0)",
        "chunk=0",
        ">= 1",
    ),
    _api(
        "remote_wrong_etag_dotdot",
        f"{GUARD}.wrong_etag('../config.json')",
        "'../config.json'",
        "wrong_etag()",
    ),
    _api(
        "remote_fault_nth_zero",
        f"{GUARD}.server_error('config.json', nth=0)",
        "nth=0",
        "server_error()",
        ">= 1",
    ),
    _api(
        "remote_fault_allow_miss_not_bool",
        f"{GUARD}.wrong_etag('config.json', allow_miss='yes')",
        "allow_miss='yes'",
        "True or False",
    ),
]
