"""Misuses of ``native_accesses`` (issue 28, file accesses made in native code): read by
misuse_cases.py."""

from __future__ import annotations

from misuse_cases import FLEET, Misuse, _fixture

CASES: list[Misuse] = [
    _fixture(
        "launch_native_accesses_text",
        "server_fleet.launch(UP, ready=ready.log('up'), native_accesses='yes')",
        FLEET,
        "native_accesses='yes'",
        "True or False",
    ),
    _fixture(
        "launch_native_accesses_number",
        "server_fleet.launch(UP, ready=ready.log('up'), native_accesses=1)",
        FLEET,
        "native_accesses=1",
        "True or False",
    ),
    _fixture(
        "launch_native_accesses_no_compiler",
        "server_fleet.launch(UP, ready=ready.log('up'), env={'CC': '/nowhere/cc'},"
        " native_accesses=True)",
        FLEET,
        "CC='/nowhere/cc'",
        "needs a C compiler",
    ),
    _fixture(
        "explore_native_accesses_text",
        "server_fleet.explore(UP, 'pointer_swap', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'), native_accesses='yes')",
        FLEET,
        "native_accesses='yes'",
        "server_fleet.explore()",
        "True or False",
    ),
    _fixture(
        "explore_warm_native_accesses",
        "server_fleet.explore(UP, 'pointer_swap', a_repo(hub_cache), 'config.json',"
        " ready=ready.log('up'), warm=True, native_accesses=True)",
        FLEET,
        "native_accesses=True",
        "warm='or_cold'",
    ),
]
