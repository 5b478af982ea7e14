"""Misuses of locks anywhere (issue 28, F5 and F6): ``LockHeld``, ``lock_held`` on a path, the
lock held for good, and ``lock_not_exclusive``. Read by ``misuse_cases.py`` into ``CASES``."""

from __future__ import annotations

from misuse_cases import _api, _fixture, _marker

IMPORT = "from pytest_startup_guard import LockHeld, LockHeldForGood, lock_not_exclusive; "
RACE_DIR = ("hub_race", "shared_dir")

CASES = [
    _api("lock_held_kind_unknown", IMPORT + "LockHeld(kind='flok')", "kind='flok'", "'flock'"),
    _api(
        "lock_held_for_good_kind_int",
        IMPORT + "LockHeldForGood(kind=3)",
        "kind=3",
        "LockHeldForGood()",
    ),
    _fixture(
        "lock_held_path_outside",
        "hub_race.arm_path('lock_held', '/etc/startup-guard.lock')",
        RACE_DIR,
        "/etc/startup-guard.lock",
        "Allowed roots",
    ),
    _fixture(
        "lock_held_path_folder",
        "(shared_dir / 'build').mkdir(); hub_race.arm_path('lock_held', shared_dir / 'build')",
        RACE_DIR,
        "'lock_held'",
        "is a folder",
    ),
    _fixture(
        "lock_held_soft_file_there",
        "(shared_dir / 'x.lock').write_text(''); "
        + IMPORT
        + "hub_race.arm_path(LockHeld(kind='soft'), shared_dir / 'x.lock')",
        RACE_DIR,
        "kind='soft'",
        "already at",
    ),
    _fixture(
        "lock_held_for_good_path_int",
        "hub_race.arm_path('lock_held_for_good', 3)",
        RACE_DIR,
        "needs a path",
        "not int",
    ),
    _api("lock_not_exclusive_path_int", IMPORT + "lock_not_exclusive(3)", "path=3", "a path"),
    _api(
        "lock_not_exclusive_path_empty",
        IMPORT + "lock_not_exclusive('')",
        "path=''",
        "lock_not_exclusive()",
    ),
    _api(
        "lock_not_exclusive_allow_miss_text",
        IMPORT + "lock_not_exclusive(tmp_path, allow_miss='no')",
        "allow_miss='no'",
        "True or False",
    ),
    _fixture(
        "lock_not_exclusive_outside",
        IMPORT
        + "server_fleet.launch(UP, ready=ready.log('up'), faults=[lock_not_exclusive('/etc')])",
        ("server_fleet", "shared_dir"),
        "'/etc'",
        "faults[0]",
        "Allowed roots",
    ),
    _marker(
        "startup_races_held_lock_misspelt",
        "@pytest.mark.startup_races(stale=['lock_held_forever'])\n"
        "def test_x(startup_case):\n    pass\n",
        "'lock_held_forever'",
        "'lock_held_for_good'",
    ),
    _marker(
        "startup_races_held_for_good_transient",
        "@pytest.mark.startup_races(transient=['lock_held_for_good'])\n"
        "def test_x(startup_case):\n    pass\n",
        "'lock_held_for_good'",
        "known races",
    ),
]
