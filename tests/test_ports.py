"""Port faults: a member's port taken, or told to two members; met for real, named when fatal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_startup_guard import port_taken, same_port
from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    AccessEvent,
    RuntimeListener,
    bind_path,
)

ROOT = Path(__file__).resolve().parent.parent
PORT_SERVER = ROOT / "examples" / "servers" / "port_server.py"

COMMON = f"""
import json, socket, sys, time, urllib.request
import pytest
from pytest_startup_guard import ready
from pytest_startup_guard import port_taken, same_port

SERVER = [sys.executable, {str(PORT_SERVER)!r}, "--port", "{{port}}"]

def health(port):
    '''What the server listening on ``port`` says about itself.'''
    with urllib.request.urlopen(f"http://127.0.0.1:{{port}}/health", timeout=10) as response:
        return json.loads(response.read())

def tree(server_fleet, fleet, server):
    import psutil
    pids = fleet.members_pids(server)
    try:
        pids |= {{c.pid for c in psutil.Process(server.pid).children(recursive=True)}}
    except psutil.Error:
        pass
    return pids

def assert_serves_on_its_own_port(server_fleet, fleet):
    '''Each server was proven ready on a port its own process answers on (checked by the fleet
    for the members in a port fault).'''
    faulted = {{index for fault in fleet.faults for index in fault.members}}
    for server in fleet.servers:
        assert server.ready, server.describe()
        assert server.port_owned is (True if server.index in faulted else None), server.describe()
        assert health(server.port)["pid"] in tree(server_fleet, fleet, server), server.describe()
    assert len({{server.port for server in fleet.servers}}) == len(fleet.servers)
"""


@pytest.fixture
def ports_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


def test_servers_that_retry_or_move_survive_and_meet_their_faults(
    ports_pytester: pytest.Pytester,
) -> None:
    ports_pytester.makepyfile(
        """
        from common import *

        def test_port_taken_and_a_server_that_retries(server_fleet):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "retry"], count=2, ready=ready.http("/health"),
                faults=[port_taken(member=1, hold=0.3)],
            )
            fleet.assert_all_ready()
            [fault] = fleet.faults
            assert fault.met and fault.kind == "port_taken" and fault.members == (1,)
            assert fault.port == fleet.servers[1].port == fleet.servers[1].told_port
            assert fault.released_t is not None and fault.released_t > fleet.released_t
            assert {hit.member for hit in fault.hits} == {1}
            assert {hit.taken_by for hit in fault.hits} == {"the test process"}
            assert {hit.pid for hit in fault.hits} <= tree(server_fleet, fleet, fleet.servers[1])
            assert all(hit.t < fault.released_t for hit in fault.hits)
            assert "port %d is in use" % fault.port in fleet.servers[1].output
            assert_serves_on_its_own_port(server_fleet, fleet)
            # a bind is reported as an access event of its own kind, apart from cache accesses
            binds = [e for e in server_fleet.controller.binds if e.port == fault.port]
            assert binds and all(e.op == "socket.bind" for e in binds)
            assert binds[0].path == "127.0.0.1:%d" % fault.port
            assert not [e for e in server_fleet.controller.accesses if e.op == "socket.bind"]

        def test_same_port_and_a_server_that_moves(server_fleet):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "other-port"], count=3, ready=ready.tcp(),
                faults=[same_port(members=(2, 0))],
            )
            fleet.assert_all_ready()
            [fault] = fleet.faults
            first, third, second = fleet.servers[2], fleet.servers[1], fleet.servers[0]
            assert fault.met and fault.port == first.port == first.told_port == second.told_port
            assert second.port != second.told_port  # it moved, and was probed where it moved to
            assert "port %d is in use" % fault.port in second.output
            assert third.port_owned is None  # in no fault: probed as always
            assert [(hit.member, hit.taken_by) for hit in fault.hits] == [
                (0, "member 2 (pid %d)" % first.pid)
            ]
            assert "(told %d)" % fault.port in second.describe()
            assert_serves_on_its_own_port(server_fleet, fleet)
        """
    )
    result = ports_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2)


def test_servers_that_die_on_a_port_fault_fail_with_the_fault_named(
    ports_pytester: pytest.Pytester,
) -> None:
    ports_pytester.makepyfile(
        """
        from common import *

        def test_port_taken(server_fleet):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "die"], count=2, ready=ready.http("/health"),
                faults=[port_taken(member=1)],
            )
            assert [s.state for s in fleet.servers] == ["ready", "exited"]
            fleet.assert_all_ready()

        def test_same_port(server_fleet):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "die"], count=2, ready=ready.http("/health"),
                faults=[same_port(members=(0, 1))],
            )
            # member 0 binds first, every run: the second binder is the one that dies
            assert [s.state for s in fleet.servers] == ["ready", "exited"]
            assert fleet.faults[0].met
            fleet.assert_all_ready()

        def test_port_taken_for_good(server_fleet):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "retry", "--retry-seconds", "0.5"], count=1,
                ready=ready.http("/health"), faults=[port_taken(member=0, hold=None)],
            )
            assert fleet.faults[0].taken and fleet.faults[0].released_t is None
            fleet.assert_all_ready()
        """
    )
    result = ports_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*_ test_port_taken _*",
            "*1 of 2 ready within*",
            "*port fault port_taken(member=1, hold=1) on port *: met: 1 bind(s) by member 1 while"
            " the test process held it",
            "*server 1  pid *  port *  EXITED with code 1 after * s, before it was ready",
            "*    port * was taken by the port_taken fault on member 1",
            "*OSError: [[]Errno *[]] Address already in use",
            "*_ test_same_port _*",
            "*port fault same_port(members=(0, 1)) on port *: met: 1 bind(s) by member 1 while"
            " member 0 (pid *) held it",
            "*server 1  pid *  EXITED with code 1*",
            "*    member 1 was told the same port * as member 0 (same_port)",
            "*_ test_port_taken_for_good _*",
            "*port fault port_taken(member=0, hold=None) on port *: met: * bind(s) by member 0*",
            "*    port * was taken by the port_taken fault on member 0",
        ]
    )


def test_readiness_is_never_proven_through_another_process_socket(
    ports_pytester: pytest.Pytester,
) -> None:
    ports_pytester.makepyfile(
        """
        from common import *

        # binds its port; if that fails, waits without ever listening
        CODE = '''
        import socket, sys, time
        listener = socket.socket()
        try:
            listener.bind(("127.0.0.1", int(sys.argv[1])))
            listener.listen()
            print("listening", flush=True)
        except OSError as error:
            print("not listening:", error, flush=True)
        time.sleep(60)
        '''.replace("\\n        ", "\\n")

        def test_the_takers_socket(server_fleet):
            fleet = server_fleet.launch(
                [sys.executable, "-c", CODE, "{port}"], count=1, ready=ready.tcp(), timeout=1.5,
                faults=[port_taken(member=0, hold=None)],
            )
            [server] = fleet.servers
            assert fleet.faults[0].met
            assert server.state == "hung" and not server.ready, server.describe()

        def test_the_other_members_socket(server_fleet):
            fleet = server_fleet.launch(
                [sys.executable, "-c", CODE, "{port}"], count=2, ready=ready.tcp(), timeout=1.5,
                faults=[same_port(members=(0, 1))],
            )
            assert fleet.faults[0].met
            assert [s.state for s in fleet.servers] == ["ready", "hung"]
            assert "not listening" in fleet.servers[1].output
        """
    )
    result = ports_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2)


def test_a_port_fault_never_met_fails_the_launch(ports_pytester: pytest.Pytester) -> None:
    ports_pytester.makepyfile(
        """
        from common import *

        # never binds anything: a fault on its port can never be met
        IDLE = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)", "{port}"]

        def test_port_taken_never_met(server_fleet):
            server_fleet.launch(IDLE, count=2, ready=ready.log("up"), faults=[port_taken(member=1, hold=0.1)])

        def test_same_port_never_met(server_fleet):
            server_fleet.launch(IDLE, count=2, ready=ready.log("up"), faults=[same_port(members=(0, 1))])

        def test_allow_miss(server_fleet):
            fleet = server_fleet.launch(
                IDLE, count=2, ready=ready.log("up"),
                faults=[port_taken(member=0, hold=0.1, allow_miss=True)],
            )
            fleet.assert_all_ready()
            assert fleet.faults[0].hits == [] and not fleet.faults[0].met
        """
    )
    result = ports_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: port fault port_taken(member=1, hold=0.1) on port * never met:"
            " member 1 never tried to bind port * while it was taken (the test process held it"
            " from before member 1 started until * s after the release) (member 1 (ready after"
            " * s): no bind reported). A port fault that was never met proves nothing; if the"
            " server may legitimately not bind this port while it is taken, pass allow_miss=True"
            " to port_taken().",
            "*port fault port_taken(member=1, hold=0.1) on port *: NEVER MET",
            "*AssertionError: port fault same_port(members=(0, 1)) on port * never met: neither"
            " member 0 nor member 1 tried to bind port * while the other one listened on it*",
        ]
    )


def test_bad_port_faults_are_clear_errors_before_anything_starts(
    ports_pytester: pytest.Pytester,
) -> None:
    ports_pytester.makepyfile(
        """
        import re
        from common import *

        def check(server_fleet, error, match, faults, argv=SERVER, probe=None, count=2):
            with pytest.raises(error, match=re.escape(match)):
                server_fleet.launch(argv, count=count, ready=probe or ready.tcp(), faults=faults)

        def test_bad_faults(server_fleet):
            check(server_fleet, ValueError,
                  "invalid member 2 in port_taken(member=2, hold=1) (faults[0] of"
                  " server_fleet.launch()): expected a member index from 0 to 1 (count=2)",
                  [port_taken(member=2)])
            check(server_fleet, ValueError,
                  "invalid member 5 in same_port(members=(0, 5)) (faults[1] of"
                  " server_fleet.launch()): expected a member index from 0 to 1 (count=2)",
                  [port_taken(member=1), same_port(members=(0, 5))])
            check(server_fleet, ValueError,
                  "member 1 is in two port faults of server_fleet.launch(): faults[0]"
                  " port_taken(member=1, hold=1) and faults[1] same_port(members=(0, 1)); a member"
                  " takes part in one port fault at most",
                  [port_taken(member=1), same_port(members=(0, 1))])
            check(server_fleet, TypeError,
                  "invalid faults[0] of server_fleet.launch(): 'port_taken'; expected"
                  " port_taken(member=k) or same_port(members=(i, j))",
                  ["port_taken"])
            check(server_fleet, TypeError,
                  "invalid faults='port_taken' for server_fleet.launch(): expected a list of"
                  " faults", "port_taken")
            check(server_fleet, ValueError,
                  "port_taken(member=0, hold=1) (faults[0] of server_fleet.launch()) faults the"
                  " members' port, but this launch has none: its argv has no {port} and"
                  " ready=ready.log('up') needs no port; put {port} in the command",
                  [port_taken(member=0)], argv=[sys.executable, "-c", "print('up')"],
                  probe=ready.log("up"))
            assert server_fleet.fleets == []  # nothing started, nothing leased

        def test_a_single_fault_needs_no_list(server_fleet):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "retry"], count=1, ready=ready.tcp(),
                faults=port_taken(member=0, hold=0.2),
            )
            assert fleet.faults[0].met
        """
    )
    result = ports_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: port_taken(member=-1),
            "invalid member=-1 for port_taken(): expected a member index (a whole number >= 0)",
        ),
        (
            lambda: port_taken(member=True),
            "invalid member=True for port_taken(): expected a member index",
        ),
        (
            lambda: port_taken(member=0, hold=0),
            "invalid hold=0 for port_taken(): expected seconds > 0 (at most 86400: a day), or None"
            " (taken until the fleet stops)",
        ),
        (lambda: port_taken(member=0, hold=float("nan")), "invalid hold=nan for port_taken()"),
        (lambda: port_taken(member=0, hold="1"), "invalid hold='1' for port_taken()"),
        (
            lambda: same_port(members=(1, 1)),
            "invalid members=(1, 1) for same_port(): expected two distinct member indexes, such"
            " as (0, 1)",
        ),
        (lambda: same_port(members=(0,)), "invalid members=(0,) for same_port()"),
        (lambda: same_port(members=(0, 1, 2)), "invalid members=(0, 1, 2) for same_port()"),
        (lambda: same_port(members="01"), "invalid members='01' for same_port()"),
        (lambda: same_port(members=(0, -1)), "invalid members=(0, -1) for same_port()"),
    ],
)
def test_bad_constructor_values_are_named(make: object, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        make()  # type: ignore[operator]
    assert str(raised.value).startswith(message)


def test_constructors_describe_themselves() -> None:
    assert port_taken(member=1).describe() == "port_taken(member=1, hold=1)"
    assert port_taken(2, hold=None).describe() == "port_taken(member=2, hold=None)"
    assert (
        same_port(members=[3, 0], allow_miss=True).describe()
        == "same_port(members=(3, 0), allow_miss=True)"
    )
    with pytest.raises(TypeError, match=r"invalid allow_miss='no' for port_taken\(\)"):
        port_taken(member=0, allow_miss="no")  # type: ignore[arg-type]


BINDER = """
import socket
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
unix = socket.socket(socket.AF_UNIX)
unix.bind("")
print(listener.getsockname()[1])
"""


def test_bind_events_name_their_address() -> None:
    event = AccessEvent(1, None, "socket.bind", bind_path("::1", 8000), 0.0, 0)
    assert (event.path, event.host, event.port) == ("[::1]:8000", "::1", 8000)
    opened = AccessEvent(1, None, "open", "/a/b:8000", 0.0, 0)
    assert (opened.host, opened.port) == (None, None)


def run_binder(controller: RuntimeController) -> None:
    subprocess.run(
        [sys.executable, "-c", BINDER],
        env={**os.environ, **controller.env},
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_binds_are_reported_only_when_the_controller_asks() -> None:
    with RuntimeController() as controller:
        run_binder(controller)
        assert controller.binds == []
        asked: list[str] = []

        class Listener(RuntimeListener):
            def on_bind(self, event: AccessEvent) -> float | None:
                asked.append(event.path)
                return 0.01 if len(asked) < 3 else None  # the binder waits twice, then binds

        controller.report_binds()
        controller.subscribe(Listener())
        run_binder(controller)
        assert asked == ["127.0.0.1:0"] * 3  # an internet address only: the Unix bind is not
        [event] = controller.binds  # recorded once, when it may proceed
        assert (event.op, event.path, event.host, event.port) == (
            "socket.bind",
            "127.0.0.1:0",
            "127.0.0.1",
            0,
        )
        assert event.member is None and controller.errors == []


def test_the_json_report_carries_each_port_fault_and_each_servers_told_port(
    guard_pytester: pytest.Pytester,
) -> None:
    from report_schema import validate

    guard_pytester.makepyfile(
        f"""
        import sys
        from pytest_startup_guard import port_taken, ready, same_port

        SERVER = [sys.executable, {str(PORT_SERVER)!r}, "--port", "{{port}}"]

        def test_ports(server_fleet):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "other-port"], count=3, ready=ready.http("/health"),
                faults=[port_taken(member=2, hold=None), same_port(members=(0, 1))],
            )
            fleet.assert_all_ready()
        """
    )
    report = guard_pytester.path / "report.json"
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", f"--startup-guard-report={report}"
    )
    result.assert_outcomes(passed=1)
    document = json.loads(report.read_text())
    assert validate(document) == []
    fleet = document["tests"][0]["fleets"][0]
    taken, shared = fleet["port_faults"]
    assert (taken["kind"], taken["members"], taken["hold"], taken["met"]) == (
        "port_taken",
        [2],
        None,
        True,
    )
    assert (shared["kind"], shared["members"], shared["met"]) == ("same_port", [0, 1], True)
    assert (
        taken["hits"][0]["member"] == "server 2"
        and taken["hits"][0]["taken_by"] == "the test process"
    )
    servers = fleet["servers"]
    assert servers[1]["told_port"] == servers[0]["port"] == shared["port"]
    assert servers[1]["port"] != servers[1]["told_port"] and servers[1]["port_owned"] is True
    assert servers[2]["told_port"] == taken["port"] != servers[2]["port"]
