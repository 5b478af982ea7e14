"""Misuses of the orders across members (``interleave``, ``listen_late``) and of the
``{port<i>}`` placeholder, as data for test_misuse.py."""

from __future__ import annotations

from misuse_cases import FLEET, Misuse, _api, _fixture

ORDER = "from pytest_startup_guard import interleave, listen_late; "
SERVE = "[PY, '-m', 'http.server', '--bind', '127.0.0.1', '{port}']"

CASES: list[Misuse] = [
    _api(
        "interleave_one_member",
        ORDER + "interleave(tmp_path, first=(0, 1), then=(0, 2))",
        "first=(0, 1)",
        "both name member 0",
    ),
    _api(
        "interleave_first_not_a_pair",
        ORDER + "interleave(tmp_path, first=0, then=(1, 1))",
        "first=0",
        "(member, nth)",
    ),
    _api(
        "interleave_nth_zero",
        ORDER + "interleave(tmp_path, first=(0, 0), then=(1, 1))",
        "first[1] (nth)=0",
        "interleave()",
    ),
    _api(
        "interleave_timeout_zero",
        ORDER + "interleave(tmp_path, first=(0, 1), then=(1, 1), timeout=0)",
        "timeout=0",
        "interleave()",
    ),
    _api(
        "interleave_path_none",
        ORDER + "interleave(None, first=(0, 1), then=(1, 1))",
        "path=None",
        "interleave()",
    ),
    _api("listen_late_member_negative", ORDER + "listen_late(-1)", "member=-1", "listen_late()"),
    _api(
        "listen_late_peer_is_member",
        ORDER + "listen_late(0, peers=[0])",
        "peers=[0]",
        "other members",
    ),
    _api(
        "listen_late_peers_text", ORDER + "listen_late(0, peers='1')", "peers='1'", "member indexes"
    ),
    _fixture(
        "listen_late_alone",
        ORDER
        + f"server_fleet.launch({SERVE}, count=1, ready=ready.http('/'), faults=[listen_late(0)])",
        FLEET,
        "listen_late(member=0)",
        "needs peers",
    ),
    _fixture(
        "listen_late_no_port",
        ORDER + "server_fleet.launch(UP, count=2, ready=ready.log('up'), faults=[listen_late(0)])",
        FLEET,
        "listen_late(member=0)",
        "put {port} in the command",
    ),
    _fixture(
        "listen_late_member_out_of_range",
        ORDER
        + f"server_fleet.launch({SERVE}, count=2, ready=ready.http('/'), faults=[listen_late(5)])",
        FLEET,
        "invalid member 5",
        "0 to 1",
    ),
    _fixture(
        "placeholder_other_port_out_of_range",
        "server_fleet.launch([PY, '-c', 'pass', '{port3}'], count=2, ready=ready.log('up'))",
        FLEET,
        "{port3}",
        "members 0 to 1",
    ),
]
