"""``port_stolen``: a port a server picks itself (a probe) is taken before its real bind, by the
test process or by another member whose probe returned the same port; met for real, named when
fatal, and never vacuous."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBE_SERVER = ROOT / "examples" / "servers" / "probe_server.py"
PORT_SERVER = ROOT / "examples" / "servers" / "port_server.py"

COMMON = f"""
import json, os, re, signal, socket, sys, time, urllib.request
import pytest
from pytest_startup_guard import port_stolen, ready

SERVER = [sys.executable, {str(PROBE_SERVER)!r}, "--port", "{{port}}"]
PORT_SERVER = [sys.executable, {str(PORT_SERVER)!r}, "--port", "{{port}}"]

def health(server):
    '''What the member says about itself: its HTTP port, its store's port, its pid.'''
    url = f"http://127.0.0.1:{{server.port}}/health"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())

def picked(server):
    '''The store ports the member picked, in order, as it printed them.'''
    return [int(port) for port in re.findall(r"picked store port (\\d+)", server.output)]

def is_free(port):
    '''Whether 127.0.0.1:port can be bound now (nobody holds it).'''
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True

def scan_base():
    '''A base for two scans: a port the system just handed out, above the leased ones.'''
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
"""


@pytest.fixture
def stolen_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


def test_a_server_that_dies_on_a_stolen_port_is_named_with_the_fault(
    stolen_pytester: pytest.Pytester,
) -> None:
    """The port member 1 picked is taken right after its probe, before its real bind, in
    Python or in native code: it dies of EADDRINUSE, and the failure names the fault."""
    from report_schema import validate

    stolen_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.parametrize("bind", ["python", "native"])
        def test_dies(server_fleet, bind):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "die", "--bind", bind], count=2,
                ready=ready.http("/health"), faults=[port_stolen(member=1)],
            )
            first, second = fleet.servers
            assert (first.state, second.state) == ("ready", "exited"), fleet.summary()
            [fault] = fleet.faults
            [probe] = fault.probes
            [hit] = fault.hits
            # the port taken is the one member 1 picked, taken after its probe was closed
            assert fault.met and fault.port == probe.port == picked(second)[0]
            assert (hit.pid, hit.member, hit.taken_by) == (second.pid, 1, "the test process")
            assert probe.t <= fault.taken_t == hit.t
            assert "Address already in use" in second.output
            binds = [event for event in fault.binds if event.pid == second.pid]
            if bind == "python":  # its real bind came after the take, and met the taker
                assert [event.t > fault.taken_t for event in binds] == [True]
            else:  # libc's bind raises no audit event: it is seen by its failure only
                assert binds == []
            assert "native bind" in second.output or bind == "python"
            fleet.assert_all_ready()
        """
    )
    report = stolen_pytester.path / "report.json"
    result = stolen_pytester.runpytest_subprocess(
        "-p", "startup_guard", f"--startup-guard-report={report}"
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_dies?python? _*",
            "*port fault port_stolen(member=1, hold=1) on port *: met: member 1's probe of"
            " port * (pid *) was taken by the test process*",
            "*server 1  pid *  port *  EXITED with code 1 after * s, before it was ready",
            "*    port *, which member 1 picked itself, was taken right after its probe by the"
            " port_stolen(member=1, hold=1) fault (EADDRINUSE)",
            "*OSError: [[]Errno *[]] Address already in use",
            "*_ test_dies?native? _*",
            "*    port *, which member 1 picked itself, was taken right after its probe by the"
            " port_stolen(member=1, hold=1) fault (EADDRINUSE)",
            "*OSError: [[]Errno *[]] Address already in use (native bind to 127.0.0.1:*)",
        ]
    )
    document = json.loads(report.read_text())
    assert validate(document) == []
    for test in document["tests"]:
        [fault] = test["fleets"][0]["port_faults"]
        assert (fault["kind"], fault["members"], fault["hold"], fault["met"]) == (
            "port_stolen",
            [1],
            1.0,
            True,
        )
        assert fault["hits"][0]["taken_by"] == "the test process" and fault["port"] > 0


def test_a_server_that_picks_again_survives_and_gets_its_port_back(
    stolen_pytester: pytest.Pytester,
) -> None:
    """A server that picks again when its port is taken comes up on another port; the taken
    port is given back after the hold (or, with hold=None, at the stop, also when the member
    was killed)."""
    stolen_pytester.makepyfile(
        """
        from common import *

        def test_retry(server_fleet):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "retry"], count=2, ready=ready.http("/health"),
                faults=[port_stolen(member=0, hold=0.3)],
            )
            fleet.assert_all_ready()
            [fault] = fleet.faults
            first = fleet.servers[0]
            stolen, store = picked(first)  # it picked twice: the first one was taken
            assert fault.met and fault.port == stolen != store == health(first)["store"]
            assert "store port %d is in use" % stolen in first.output
            # only its first probe was taken; the second is recorded
            assert [probe.port for probe in fault.probes] == [stolen, store]
            assert len(fault.hits) == 1
            # member 1 is in no fault: its probe was never taken
            assert len(picked(fleet.servers[1])) == 1
            # given back once member 0 had 0.3 s of its own time, and not before
            deadline = time.monotonic() + 10
            while fault.taken and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not fault.taken and fault.released_t - fault.taken_t >= 0.3
            assert is_free(stolen)

        def test_hold_none_and_a_killed_member(server_fleet):
            fleet = server_fleet.launch(
                [*SERVER, "--on-busy", "retry", "--pick", "scan", "--base", str(scan_base())],
                count=1, ready=ready.http("/health"), faults=[port_stolen(member=0, hold=None)],
            )
            fleet.assert_all_ready()
            [fault] = fleet.faults
            [server] = fleet.servers
            assert fault.met and fault.taken and not is_free(fault.port)
            # a scan moves past the taken port to the next one
            assert picked(server) == [fault.port, fault.port + 1]
            os.kill(server.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while not is_free(fault.port + 1) and time.monotonic() < deadline:
                time.sleep(0.01)  # its store's socket is gone: it is dead
            assert is_free(fault.port + 1)
            assert fault.taken and not is_free(fault.port)  # held for good: until the stop
            fleet.stop()
            assert not fault.taken and fault.released_t is not None and is_free(fault.port)
        """
    )
    result = stolen_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=2)


def test_two_members_whose_scans_return_one_port(stolen_pytester: pytest.Pytester) -> None:
    """by=j: two members scan from one base (vllm-project/vllm#43206). Both probes return the
    base, member k binds it first, and member j's bind meets it taken: j dies, or picks again.
    The order is the fault's, not the launch's: k=1 binds first in the second test."""
    stolen_pytester.makepyfile(
        """
        from common import *

        def launch(server_fleet, policy, fault):
            base = scan_base()
            command = [*SERVER, "--on-busy", policy, "--pick", "scan", "--base", str(base)]
            fleet = server_fleet.launch(
                command, count=2, ready=ready.http("/health"), faults=[fault]
            )
            return fleet, base

        def test_collision_dies(server_fleet):
            fleet, base = launch(server_fleet, "die", port_stolen(member=0, by=1))
            first, second = fleet.servers
            assert (first.state, second.state) == ("ready", "exited"), fleet.summary()
            [fault] = fleet.faults
            assert fault.met and fault.port == base == health(first)["store"]
            assert picked(first) == picked(second) == [base]
            [hit] = fault.hits
            assert (hit.pid, hit.member) == (second.pid, 1)
            assert hit.taken_by == "member 0 (pid %d)" % first.pid
            assert "Address already in use" in second.output
            fleet.assert_all_ready()

        def test_collision_handled(server_fleet):
            fleet, base = launch(server_fleet, "retry", port_stolen(member=1, by=0))
            fleet.assert_all_ready()
            first, second = fleet.servers
            [fault] = fleet.faults
            assert fault.met and fault.port == base == health(second)["store"]
            # member 0 picked the base too, met it taken by member 1, and scanned on
            assert picked(first)[0] == base and health(first)["store"] > base
            assert "store port %d is in use" % base in first.output
        """
    )
    result = stolen_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*port fault port_stolen(member=0, by=1) on port *: met: member 1's probe (pid *)"
            " returned port *, which member 0 (pid *) had probed*",
            "*server 1  pid *  port *  EXITED with code 1 after * s, before it was ready",
            "*    member 1 picked port *, which member 0 had picked too (port_stolen(member=0,"
            " by=1)): member 0 bound it first (EADDRINUSE)",
        ]
    )


def test_a_member_that_never_probes_fails_the_launch(stolen_pytester: pytest.Pytester) -> None:
    """Never vacuous: a server that binds its port directly (no probe) cannot meet the fault;
    the launch fails, naming the member and the binds it made, unless allow_miss=True; a
    member of a by= pair whose probes never return the other's port is named the same way."""
    stolen_pytester.makepyfile(
        """
        from common import *

        def test_never_probes(server_fleet):
            with pytest.raises(AssertionError) as raised:
                server_fleet.launch(
                    PORT_SERVER, count=2, ready=ready.http("/health"),
                    faults=[port_stolen(member=1)],
                )
            message = str(raised.value)
            assert "port fault port_stolen(member=1, hold=1) never met:" in message, message
            assert "member 1 never probed a port" in message, message
            port = server_fleet.fleets[0].servers[1].port
            assert "binds port %d at" % port in message, message
            assert "allow_miss=True" in message

        def test_allowed_to_miss(server_fleet):
            fleet = server_fleet.launch(
                PORT_SERVER, count=1, ready=ready.http("/health"),
                faults=[port_stolen(member=0, allow_miss=True)],
            )
            fleet.assert_all_ready()
            assert not fleet.faults[0].met and fleet.faults[0].probes == []

        def test_probes_that_never_collide(server_fleet):
            # port 0 probes: the system gives each member a port of its own
            with pytest.raises(AssertionError) as raised:
                server_fleet.launch(
                    [*SERVER, "--pick", "zero"], count=2, ready=ready.http("/health"),
                    faults=[port_stolen(member=0, by=1)],
                )
            message = str(raised.value)
            first, second = (picked(server)[0] for server in server_fleet.fleets[0].servers)
            assert (
                "member 1's probes never returned a port member 0 probed (member 0 probed"
                " port %d; member 1 probed port %d)" % (first, second)
            ) in message, message
        """
    )
    result = stolen_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=3)
