"""Misuses of warm starts (issue 30, members forked from a warm template): read by
misuse_cases.py."""

from __future__ import annotations

from misuse_cases import FLEET, Misuse, _env, _fixture, _ini, _option

CASES: list[Misuse] = [
    _fixture(
        "launch_warm_word",
        "server_fleet.launch(UP, ready=ready.log('up'), warm='yes')",
        FLEET,
        "warm='yes'",
        "'or_cold'",
    ),
    _fixture(
        "launch_warm_number",
        "server_fleet.launch(UP, ready=ready.log('up'), warm=1)",
        FLEET,
        "warm=1",
        "True (fork members",
    ),
    _fixture(
        "launch_preload_one_str",
        "server_fleet.launch(UP, ready=ready.log('up'), preload='transformers')",
        FLEET,
        "preload='transformers'",
        "such as ['transformers']",
    ),
    _fixture(
        "launch_preload_not_a_module",
        "server_fleet.launch(UP, ready=ready.log('up'), preload=['transformers/'])",
        FLEET,
        "preload[0]='transformers/'",
        "a module name",
    ),
    _fixture(
        "launch_preload_empty",
        "server_fleet.launch(UP, ready=ready.log('up'), preload=[])",
        FLEET,
        "preload=[]",
        "one or more",
    ),
    _fixture(
        "launch_preload_with_warm_false",
        "server_fleet.launch(UP, ready=ready.log('up'), warm=False, preload=['json'])",
        FLEET,
        "warm=False with preload=['json']",
        "drop warm=False",
    ),
    _fixture(
        "launch_warm_native_accesses",
        "server_fleet.launch(UP, ready=ready.log('up'), warm=True, native_accesses=True)",
        FLEET,
        "native_accesses=True",
        "warm='or_cold'",
    ),
    _option(
        "warm_option_word", "--startup-guard-warm=yes", "--startup-guard-warm 'yes'", "or_cold"
    ),
    _env("env_warm_word", "STARTUP_GUARD_WARM=always", "STARTUP_GUARD_WARM 'always'", "or_cold"),
    _ini("ini_warm_word", "startup_guard_warm = fork", "startup_guard_warm 'fork'", "or_cold"),
]
