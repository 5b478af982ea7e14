"""Misuses at the launch's boundary and of the numeric settings (issue 42, "one boundary,
checked whole"): read by misuse_cases.py.

Every launch case runs ``LOUD``, a command that fails as soon as it starts: a launch that is
not refused at the call starts it, and the case then ends in the member's exit or in a fault
"never met" (neither is the plugin's error at the call), so it fails.
"""

from __future__ import annotations

from misuse_cases import FLEET, Misuse, _api, _env, _fixture, _ini, _option

# The shared PRELUDE imports neither these faults nor LOUD: each case starts with this line.
GIVEN = (
    "from pytest_startup_guard import fs_error, interleave, listen_late, network_fs;"
    " LOUD = [PY, '-c', 'raise SystemExit(\"a member started: the launch was not refused\")'];"
    " "
)


def _launch(id: str, arguments: str, *words: str) -> Misuse:
    """``server_fleet.launch(LOUD...)`` with ``arguments`` (after the command)."""
    return _fixture(id, GIVEN + f"server_fleet.launch(LOUD{arguments})", FLEET, *words)


FAULT_MEMBERS = [
    _launch(
        "launch_fs_error_member_missing",
        ", count=2, ready=ready.log('up'), faults=[fs_error('EIO', tmp_path, member=5)]",
        "member 5",
        "from 0 to 1",
        "fs_error(",
    ),
    _launch(
        "launch_network_fs_member_missing",
        ", count=2, ready=ready.log('up'), faults=network_fs(tmp_path, members=[0, 7])",
        "member 7",
        "from 0 to 1",
        "network_fs(",
    ),
    _launch(
        "launch_interleave_then_missing",
        ", count=2, ready=ready.log('up'), faults=[interleave(tmp_path, first=(0, 1),"
        " then=(5, 1))]",
        "member 5",
        "from 0 to 1",
        "interleave(",
    ),
    _launch(
        "launch_interleave_first_missing",
        ", count=2, ready=ready.log('up'), faults=[interleave(tmp_path, first=(2, 1),"
        " then=(0, 1))]",
        "member 2",
        "from 0 to 1",
    ),
    _launch(
        "launch_listen_late_member_missing",
        " + ['{port}'], count=2, ready=ready.log('up'), faults=[listen_late(member=4)]",
        "member 4",
        "from 0 to 1",
    ),
    _launch(
        "launch_listen_late_peer_missing",
        " + ['{port}'], count=2, ready=ready.log('up'), faults=[listen_late(member=0, peers=[9])]",
        "member 9",
        "from 0 to 1",
    ),
    _launch(
        "launch_same_port_member_missing",
        " + ['{port}'], count=2, ready=ready.log('up'), faults=[same_port((0, 3))]",
        "member 3",
        "from 0 to 1",
    ),
]

PROBES = [
    _api(
        "ready_call_takes_nothing",
        "ready.call(lambda: True)",
        "ready.call()",
        "takes no argument",
        "one argument (the member",
    ),
    _api(
        "ready_call_takes_two",
        "ready.call(lambda member, other: True)",
        "ready.call()",
        "one argument (the member",
    ),
    _api(
        "ready_http_expect_takes_nothing",
        "ready.http('/h', expect=lambda: True)",
        "expect=",
        "ready.http()",
        "one argument (the body",
    ),
    _api(
        "ready_http_expect_keyword_only",
        "ready.http('/h', expect=lambda *, body: True)",
        "expect=",
        "one argument (the body",
    ),
    _launch("launch_ready_class", ", ready=ready.Http", "ready=", "call it: ready.http("),
    _launch("launch_ready_class_tcp", ", ready=ready.Tcp", "ready=", "call it: ready.tcp("),
    _launch(
        "launch_tcp_without_port",
        ", ready=ready.tcp()",
        "ready.tcp()",
        "{port}",
        "ports=",
    ),
    _launch(
        "launch_http_without_port",
        ", ready=ready.http('/health')",
        "ready.http('/health'",
        "{port}",
    ),
    _launch(
        "launch_file_port_without_port",
        ", ready=ready.file(str(tmp_path / '{port}.ready'))",
        "ready.file(",
        "{port}",
    ),
]

PLACEHOLDERS = [
    _launch(
        "launch_placeholder_format_spec",
        " + ['--name={index:x}'], ready=ready.log('up')",
        "{index:x}",
        "argv[3]",
        "{index}",
    ),
    _launch(
        "launch_placeholder_arithmetic",
        " + ['--peer={port-1}'], ready=ready.log('up')",
        "{port-1}",
        "argv[3]",
        "{port}",
    ),
    _launch(
        "launch_placeholder_conversion",
        " + ['{count!r}'], ready=ready.log('up')",
        "{count!r}",
        "{count}",
    ),
    _launch(
        "launch_placeholder_spaced",
        " + ['{ port }'], ready=ready.log('up')",
        "{ port }",
        "{port}",
    ),
]

ENV = [
    _launch(
        "launch_env_plan",
        ", ready=ready.log('up'), env={'STARTUP_GUARD_PLAN': str(tmp_path)}",
        "env['STARTUP_GUARD_PLAN']",
        "the child runtime",
    ),
    _launch(
        "launch_env_timeout_setting",
        ", ready=ready.log('up'), env={'STARTUP_GUARD_TIMEOUT': '5'}",
        "env['STARTUP_GUARD_TIMEOUT']",
        "timeout=",
    ),
    _launch(
        "launch_env_seed_setting",
        ", ready=ready.log('up'), env={'STARTUP_GUARD_SEED': '1'}",
        "env['STARTUP_GUARD_SEED']",
        "--startup-guard-seed",
    ),
    _launch(
        "launch_env_name_equals",
        ", ready=ready.log('up'), env={'A=B': 'x'}",
        "'A=B'",
        "without '='",
    ),
    _launch(
        "launch_env_value_nul",
        ", ready=ready.log('up'), env={'X': 'a\\x00b'}",
        "env['X']",
        "NUL",
    ),
]

NUMBERS = [
    _launch(
        "launch_timeout_huge", ", ready=ready.log('up'), timeout=1e300", "timeout=1e+300", "86400"
    ),
    _launch(
        "launch_timeout_bool", ", ready=ready.log('up'), timeout=True", "timeout=True", "seconds"
    ),
    _launch("launch_count_huge", ", count=10**6, ready=ready.log('up'), ", "count=1000000", "256"),
    _launch(
        "launch_count_float", ", count=2.0, ready=ready.log('up')", "count=2.0", "whole number"
    ),
    _launch(
        "launch_workers_huge", ", ready=ready.log('up'), workers=10**9", "workers=1000000000", "256"
    ),
    _launch(
        "launch_workers_bool",
        ", ready=ready.log('up'), workers=True",
        "workers=True",
        "whole number",
    ),
    _api("port_taken_hold_huge", "port_taken(0, hold=1e300)", "hold=1e+300", "86400"),
    _api(
        "fs_error_nth_huge_float",
        "from pytest_startup_guard import fs_error; fs_error('EIO', tmp_path, nth=1e300)",
        "nth=1e+300",
        "whole number",
    ),
    _api(
        "interleave_timeout_huge",
        "from pytest_startup_guard import interleave;"
        " interleave(tmp_path, first=(0, 1), then=(1, 1), timeout=1e12)",
        "timeout=1000000000000.0",
        "86400",
    ),
    _api(
        "network_fs_delay_huge",
        "from pytest_startup_guard import network_fs; network_fs(tmp_path, delay=1e300)",
        "delay=1e+300",
        "86400",
    ),
    _api(
        "listen_late_timeout_huge",
        "from pytest_startup_guard import listen_late; listen_late(0, timeout=1e300)",
        "timeout=1e+300",
        "86400",
    ),
    _api("cpu_load_limit_huge", "with cpu_load(1, limit=1e300): pass", "limit=1e+300", "86400"),
    _api(
        "import_race_timeout_huge", "import_race('json', timeout=1e300)", "timeout=1e+300", "86400"
    ),
]

CHOICES = [
    _api(
        "env_choices_allowed_text",
        "check_env_choices([PY, '-c', 'pass'], 'X', 'spawn')",
        "allowed='spawn'",
        "['spawn']",
    ),
    _api(
        "env_choices_unlisted_text",
        "check_env_choices([PY, '-c', 'pass'], 'X', ['spawn'], unlisted='bogus')",
        "unlisted='bogus'",
        "['bogus']",
    ),
]

SETTINGS = [
    _option(
        "timeout_huge",
        "--startup-guard-timeout=1e300",
        "--startup-guard-timeout '1e300'",
        "86400",
    ),
    _option(
        "timeout_past_a_day",
        "--startup-guard-timeout=1e9",
        "--startup-guard-timeout '1e9'",
        "86400",
    ),
    _option(
        "stress_huge",
        "--startup-guard-stress=100000000000000000000",
        "--startup-guard-stress '100000000000000000000'",
        "10000",
    ),
    _env(
        "env_timeout_huge", "STARTUP_GUARD_TIMEOUT=1e300", "STARTUP_GUARD_TIMEOUT '1e300'", "86400"
    ),
    _env(
        "env_stress_huge",
        "STARTUP_GUARD_STRESS=99999999",
        "STARTUP_GUARD_STRESS '99999999'",
        "10000",
    ),
    _ini(
        "ini_timeout_huge",
        "startup_guard_timeout = 1e300",
        "startup_guard_timeout '1e300'",
        "86400",
    ),
    _ini(
        "ini_timeout_cuda_huge",
        "startup_guard_timeout_cuda = inf",
        "startup_guard_timeout_cuda 'inf'",
        "86400",
        args=("--startup-target=cuda",),
    ),
]

CASES: list[Misuse] = [
    *FAULT_MEMBERS,
    *PROBES,
    *PLACEHOLDERS,
    *ENV,
    *NUMBERS,
    *CHOICES,
    *SETTINGS,
]
