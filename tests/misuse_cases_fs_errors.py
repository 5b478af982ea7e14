"""Misuses of the file-system faults (``fs_error``, ``network_fs``) and of ``on_access(op=...)``,
as data for test_misuse.py: each error names the argument, the bad value and what is accepted."""

from __future__ import annotations

from misuse_cases import FLEET, Misuse, _api, _fixture

FS = "from pytest_startup_guard import fs_error, network_fs; "
ROOTED = ("server_fleet", "shared_dir")

CASES: list[Misuse] = [
    _api(
        "fs_error_unknown_name",
        FS + "fs_error('ESTAL', tmp_path)",
        "error='ESTAL'",
        "errno name",
        "ESTALE",
    ),
    _api("fs_error_lower_case", FS + "fs_error('estale', tmp_path)", "error='estale'", "ESTALE"),
    _api("fs_error_unknown_number", FS + "fs_error(99999, tmp_path)", "error=99999", "no errno"),
    _api("fs_error_float", FS + "fs_error(1.5, tmp_path)", "error=1.5", "errno name"),
    _api(
        "fs_error_op_unknown",
        FS + "fs_error('EIO', tmp_path, op='stat')",
        "op='stat'",
        "no operation of that name",
        "rename",
    ),
    _api("fs_error_op_empty", FS + "fs_error('EIO', tmp_path, op=[])", "op=[]", "non-empty"),
    _api("fs_error_op_number", FS + "fs_error('EIO', tmp_path, op=3)", "op=3", "operation's name"),
    _api("fs_error_nth_zero", FS + "fs_error('EIO', tmp_path, nth=0)", "nth=0", "fs_error()"),
    _api("fs_error_times_zero", FS + "fs_error('EIO', tmp_path, times=0)", "times=0", "fs_error()"),
    _api(
        "fs_error_member_negative",
        FS + "fs_error('EIO', tmp_path, member=-1)",
        "member=-1",
        "whole number",
    ),
    _api("fs_error_path_none", FS + "fs_error('EIO', None)", "path=None", "fs_error()"),
    _api(
        "fs_error_allow_miss_text",
        FS + "fs_error('EIO', tmp_path, allow_miss='yes')",
        "allow_miss='yes'",
        "True or False",
    ),
    _api("on_access_op_unknown", "on_access(op='stat')", "op='stat'", "stat, exists and access"),
    _api("on_access_op_number", "on_access(op=3)", "op=3", "on_access()"),
    _api(
        "network_fs_one_member",
        FS + "network_fs(tmp_path, members=[0])",
        "members=[0]",
        "two hosts",
    ),
    _api(
        "network_fs_members_text",
        FS + "network_fs(tmp_path, members='01')",
        "members='01'",
        "member indexes",
    ),
    _api("network_fs_path_none", FS + "network_fs(None)", "path=None", "network_fs()"),
    _api(
        "network_fs_delay_negative",
        FS + "network_fs(tmp_path, delay=-1)",
        "delay=-1",
        "network_fs()",
    ),
    _fixture(
        "fs_error_outside_the_tests_folders",
        FS
        + "server_fleet.launch(UP, ready=ready.log('up'), faults=[fs_error('EIO', '/etc/hostname')])",
        ROOTED,
        "fs_error('EIO', '/etc/hostname')",
        "not under a folder the plugin owns",
        "shared_dir",
    ),
    _fixture(
        "network_fs_on_a_file",
        FS + "(shared_dir / 'f').write_text('x'); server_fleet.launch(UP, ready=ready.log('up'),"
        " faults=network_fs(shared_dir / 'f'))",
        ROOTED,
        "expected an existing folder",
        "a file",
    ),
    _fixture(
        "faults_unknown_kind",
        "server_fleet.launch(UP, ready=ready.log('up'), faults=['ESTALE'])",
        FLEET,
        "'ESTALE'",
        "fs_error",
    ),
]
