"""Misuses of ``port_stolen`` (issue 28, ports a server picks itself): read by misuse_cases.py."""

from __future__ import annotations

from misuse_cases import FLEET, Misuse, _api, _fixture

# The shared PRELUDE does not import port_stolen: each case imports it on its line.
STOLEN = "from pytest_startup_guard import port_stolen; "

CASES: list[Misuse] = [
    _api("port_stolen_member_negative", STOLEN + "port_stolen(-1)", "member=-1", "member index"),
    _api("port_stolen_member_text", STOLEN + "port_stolen('0')", "member='0'", "whole number"),
    _api("port_stolen_member_bool", STOLEN + "port_stolen(True)", "member=True", "port_stolen()"),
    _api("port_stolen_by_self", STOLEN + "port_stolen(1, by=1)", "by=1", "another member"),
    _api("port_stolen_by_negative", STOLEN + "port_stolen(0, by=-2)", "by=-2", "whole number"),
    _api("port_stolen_by_float", STOLEN + "port_stolen(0, by=1.0)", "by=1.0", "port_stolen()"),
    _api("port_stolen_hold_zero", STOLEN + "port_stolen(0, hold=0)", "hold=0", "seconds > 0"),
    _api("port_stolen_hold_negative", STOLEN + "port_stolen(0, hold=-1)", "hold=-1", "or None"),
    _api("port_stolen_hold_nan", STOLEN + "port_stolen(0, hold=NAN)", "hold=nan", "seconds"),
    _api("port_stolen_hold_text", STOLEN + "port_stolen(0, hold='1')", "hold='1'", "seconds"),
    _api(
        "port_stolen_allow_miss_text",
        STOLEN + "port_stolen(0, allow_miss='no')",
        "allow_miss='no'",
        "True or False",
    ),
    _fixture(
        "launch_port_stolen_member_missing",
        STOLEN + "server_fleet.launch(UP, ready=ready.log('up'), faults=[port_stolen(2)])",
        FLEET,
        "member 2",
        "from 0 to 0",
    ),
    _fixture(
        "launch_port_stolen_by_missing",
        STOLEN
        + "server_fleet.launch(UP, count=2, ready=ready.log('up'), faults=[port_stolen(0, by=2)])",
        FLEET,
        "member 2",
        "port_stolen(member=0, by=2)",
        "from 0 to 1",
    ),
    _fixture(
        "launch_port_stolen_member_twice",
        STOLEN + "server_fleet.launch(UP, count=2, ready=ready.log('up'),"
        " faults=[port_stolen(0), port_stolen(1, by=0)])",
        FLEET,
        "member 0 is in two port faults",
        "one port fault at most",
    ),
]
