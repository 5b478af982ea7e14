"""Orders across members (``interleave``, ``listen_late``) and the ``{port<i>}`` placeholder,
run as users run them: pytester writes the test, real servers on real loopback ports."""

from __future__ import annotations

import os
import re

import pytest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "examples"))
PRELUDE = f"""
import os, sys
from pathlib import Path
import pytest
sys.path.insert(0, {EXAMPLES!r})
from faults import cluster_server, codegen_server
from pytest_startup_guard import interleave, listen_late, ready
"""
RUN = ("-p", "startup_guard", "-p", "xdist", "-n", "2")


def test_interleave_gives_the_same_order_in_every_run(guard_pytester: pytest.Pytester) -> None:
    """Member 1 reads before member 0 appends and appends after it: the naive generator ends
    with two definitions on disk (the truth, read from the header) and member 1 (which
    compiles after both appends) fails, in each of 4 runs; the atomic one never does. Member 0
    compiles while member 1 appends: either may come first, so it is not judged."""
    guard_pytester.makepyfile(
        PRELUDE
        + """
@pytest.mark.parametrize("run", range(4))
@pytest.mark.parametrize("policy", ["naive", "atomic"])
def test_generators(shared_dir, server_fleet, policy, run):
    header = shared_dir / "generated.h"
    faults = [interleave(header, first=(1, 1), then=(0, 2)),
              interleave(header, first=(0, 2), then=(1, 2))]
    fleet = server_fleet.launch(codegen_server(shared_dir, policy), count=2,
                                ready=ready.http("/health"), timeout=8, faults=faults)
    definitions = header.read_text().count("struct SfLayout")
    ready_count = int(fleet.servers[1].ready)
    with open(Path(__file__).parent / "outcomes.txt", "a") as handle:
        handle.write(f"OUTCOME {policy} {definitions} {ready_count}\\n")
"""
    )
    result = guard_pytester.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=8)
    outcomes = re.findall(
        r"OUTCOME (\w+) (\d) (\d)", (guard_pytester.path / "outcomes.txt").read_text()
    )
    assert sorted(outcomes) == sorted([("naive", "2", "0")] * 4 + [("atomic", "1", "1")] * 4), (
        result.stdout.str()
    )


def test_an_order_that_cannot_happen_fails_the_launch(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        PRELUDE
        + """
def test_never_third(shared_dir, server_fleet):
    header = shared_dir / "generated.h"
    server_fleet.launch(codegen_server(shared_dir, "atomic"), count=2,
                        ready=ready.http("/health"), timeout=8,
                        faults=[interleave(header, first=(0, 1), then=(1, 9))])


def test_first_never_gets_there(shared_dir, server_fleet):
    header = shared_dir / "generated.h"
    server_fleet.launch(codegen_server(shared_dir, "atomic"), count=2,
                        ready=ready.http("/health"), timeout=8,
                        faults=[interleave(header, first=(0, 9), then=(1, 1), timeout=0.3)])


def test_allowed(shared_dir, server_fleet):
    header = shared_dir / "generated.h"
    fleet = server_fleet.launch(codegen_server(shared_dir, "atomic"), count=2,
                                ready=ready.http("/health"), timeout=8,
                                faults=[interleave(header, first=(0, 9), then=(1, 1), timeout=0.3,
                                                   allow_miss=True)])
    fleet.assert_all_ready()
"""
    )
    result = guard_pytester.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=1, failed=2)
    text = result.stdout.str()
    assert "was never met: member 1 never made access 9 there" in text
    assert (
        "was never met: member 1's access 1 went on without it: member 0 did not reach it" in text
    )


def test_listen_late_holds_the_head_until_every_worker_tried(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        PRELUDE
        + """
@pytest.mark.parametrize("policy", ["naive", "wait"])
def test_cluster(server_fleet, policy):
    import re

    fleet = server_fleet.launch(cluster_server(policy), count=3, ready=ready.http("/health"),
                                timeout=8, faults=[listen_late(member=0)])
    assert fleet.servers[0].ready
    summary = fleet.summary()
    assert re.search(r"connects tried: member 1 at [+]\\d.*member 2 at", summary), summary
    if policy == "naive":
        for server in fleet.servers[1:]:
            assert not server.ready
            assert "before that member listened (listen_late(member=0))" in server.reason
    else:
        fleet.assert_all_ready()


def test_peers_that_never_connect(server_fleet):
    command = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "{port}"]
    server_fleet.launch(command, count=2, ready=ready.http("/"), timeout=8,
                        faults=[listen_late(member=0, timeout=0.3)])
"""
    )
    result = guard_pytester.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=2, failed=1)
    assert (
        "listen_late(member=0, timeout=0.3) (faults[0] of server_fleet.launch()) was never met:"
        " member(s) 1 did not try to connect to port" in result.stdout.str()
    )


def test_port_placeholders_name_other_members_ports(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
import sys
import pytest
from pytest_startup_guard import InvalidArgumentError, ready

SHOW = "import sys, time; print('args', *sys.argv[1:], flush=True); time.sleep(60)"


def test_filled(server_fleet):
    fleet = server_fleet.launch([sys.executable, "-c", SHOW, "{port}", "{port0}", "{port1}"],
                                count=2, ready=ready.log("args"), timeout=8)
    fleet.assert_all_ready()
    ports = [server.port for server in fleet.servers]
    for server in fleet.servers:
        assert server.output_mentions(f"args {server.port} {ports[0]} {ports[1]}")


def test_out_of_range(server_fleet):
    with pytest.raises(InvalidArgumentError, match=r"placeholder \\{port2\\}.*members 0 to 1"):
        server_fleet.launch([sys.executable, "-c", SHOW, "{port2}"], count=2,
                            ready=ready.log("args"))
"""
    )
    guard_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=2)
