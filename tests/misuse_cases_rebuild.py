"""Misuses of the rebuild cases (``startup_races(rebuild=[...])``), as data for test_misuse.py.

Each names the argument and the bad value it was given, and what is accepted: a path that is not
a plain file, or lies outside the test's folders, a hub repo's file, a trigger, ``whole=`` that
is not a callable or given to another kind of case, and bad ``rebuild=`` values in the marker.
"""

from __future__ import annotations

from misuse_cases import FLEET, Misuse, _fixture, _marker

EMPTY = "@pytest.mark.startup_races(rebuild=['empty'])"
CASE = ("startup_case", "shared_dir")
# A one-byte cache entry under shared_dir (``e``), for the cases that get past apply().
ENTRY = "e = shared_dir / 'e.bin'; e.write_bytes(b'x'); "

CASES: list[Misuse] = [
    _fixture(
        "rebuild_apply_folder",
        "(shared_dir / 'cache').mkdir(); startup_case.apply(shared_dir / 'cache')",
        CASE,
        "invalid path=",
        "cache'",
        "it is a folder",
        "expected a plain file",
        marker=EMPTY,
    ),
    _fixture(
        "rebuild_apply_missing_file",
        "startup_case.apply(shared_dir / 'gone.bin')",
        CASE,
        "gone.bin'",
        "startup_case.apply() of case rebuild-empty",
        "no file is there",
        marker=EMPTY,
    ),
    _fixture(
        "rebuild_apply_empty_file",
        "(shared_dir / 'e.bin').write_bytes(b''); startup_case.apply(shared_dir / 'e.bin')",
        CASE,
        "e.bin'",
        "the file is empty",
        marker=EMPTY,
    ),
    _fixture(
        "rebuild_apply_symlink",
        "(shared_dir / 'link').symlink_to(shared_dir); startup_case.apply(shared_dir / 'link')",
        CASE,
        "link'",
        "not a plain file",
        marker="@pytest.mark.startup_races(rebuild=['garbage'])",
    ),
    _fixture(
        "rebuild_apply_outside_the_test",
        "startup_case.apply('/etc/hostname')",
        CASE,
        "/etc/hostname",
        "not under a folder the plugin owns",
        "Allowed roots",
        marker=EMPTY,
    ),
    _fixture(
        "rebuild_apply_hub_file",
        "startup_case.apply(a_repo(hub_cache), 'config.json')",
        ("startup_case", "hub_cache"),
        "invalid apply(",
        "'config.json'",
        "expected apply(path)",
        marker=EMPTY,
    ),
    _fixture(
        "rebuild_apply_trigger",
        ENTRY + "startup_case.apply(e, trigger=on_access())",
        CASE,
        "trigger=OnAccess(",
        "rebuild-empty",
        "takes no trigger",
        marker=EMPTY,
    ),
    _fixture(
        "rebuild_check_whole_not_callable",
        ENTRY + "startup_case.apply(e); fleet = server_fleet.launch(UP, ready=ready.log('up'));"
        " startup_case.check(fleet, whole=3)",
        (*CASE, *FLEET),
        "whole=3",
        "a callable that takes the entry's bytes",
        marker=EMPTY,
    ),
    _fixture(
        "rebuild_check_whole_on_a_corrupt_case",
        "startup_case.apply(a_repo(hub_cache), 'config.json');"
        " fleet = server_fleet.launch(UP, ready=ready.log('up'));"
        " startup_case.check(fleet, whole=len)",
        ("startup_case", *FLEET),
        "whole=<built-in function len>",
        "corrupt case",
        "leave it out",
        marker="@pytest.mark.startup_races(corrupt=['empty'])",
    ),
    _marker(
        "startup_races_rebuild_text",
        "@pytest.mark.startup_races(rebuild='empty')\ndef test_x(startup_case):\n    pass\n",
        "rebuild='empty'",
        "list of names or 'all'",
    ),
    _marker(
        "startup_races_rebuild_unknown",
        "@pytest.mark.startup_races(rebuild=['emty'])\ndef test_x(startup_case):\n    pass\n",
        "'emty'",
        "did you mean 'empty'",
        "empty, garbage, truncated",
    ),
    _marker(
        "startup_races_rebuild_hold",
        "@pytest.mark.startup_races(rebuild=['empty'], hold=1)\ndef test_x(startup_case):\n"
        "    pass\n",
        "hold=1",
        "add transient=[...]",
    ),
]
