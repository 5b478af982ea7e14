"""Verdicts hold under load: time-outs and race holds count a process's own time, a machine too
slow to decide says so, and ``--startup-guard-stress=N`` finds a verdict that flips.

Tests that need a busy machine make their own: ``cpu_load`` pins spinning processes to one CPU
for the test's duration (each also ends by itself), and the server under test pins itself to
the same CPU, so its share of that CPU is known whatever else runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from pytest_startup_guard import cpu_load
from pytest_startup_guard.races.armed import _Holder
from pytest_startup_guard.runtime.own_time import HOLD_MAX_STRETCH, OwnClock, cpu_wait

LOADED_CPU = max(os.sched_getaffinity(0))
needs_schedstat = pytest.mark.skipif(
    cpu_wait(os.getpid()) is None,
    reason="this kernel has no /proc/<pid>/schedstat: own time is wall time here",
)

# A server that pins itself to LOADED_CPU, then does what argv[1] says before it listens:
# "work:S" spins S seconds of CPU time; "spin" spins forever; "sleep" sleeps forever.
PINNED_SERVER = f"""
import os, socket, sys, time
os.sched_setaffinity(0, {{{LOADED_CPU}}})
what = sys.argv[1]
if what == "spin":
    while True:
        pass
if what == "sleep":
    time.sleep(3600)
seconds = float(what.split(":")[1])
start = time.process_time()
while time.process_time() - start < seconds:
    pass
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[2])))
server.listen()
print("listening", flush=True)
while True:
    server.accept()[0].close()
"""


def spinner_on(cpu: int) -> subprocess.Popen[bytes]:
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    return subprocess.Popen([sys.executable, "-c", code])


@needs_schedstat
def test_own_time_leaves_out_the_wait_for_a_cpu() -> None:
    process = spinner_on(LOADED_CPU)
    try:
        with cpu_load(3, cpus=[LOADED_CPU], limit=30):
            clock = OwnClock(process.pid)
            time.sleep(1.5)
            waited, own = clock.waited(), clock.own()
    finally:
        process.kill()
        process.wait()
    # Four spinners share one CPU: each waits about three quarters of the time.
    assert waited > 0.5, waited
    assert own < 1.0, own
    assert cpu_wait(process.pid) is None  # reaped: nothing to read, and no error


def test_own_time_is_wall_time_for_a_process_that_does_not_wait() -> None:
    clock = OwnClock(os.getpid())
    time.sleep(0.3)
    assert clock.own() == pytest.approx(0.3, abs=0.1)


class _StoppedClock(OwnClock):
    """An own clock whose process waited ``waiting`` seconds for a CPU."""

    def __init__(self, started: float, waiting: float) -> None:
        super().__init__(os.getpid(), started)
        self.waiting = waiting

    def waited(self) -> float:
        return self.waiting


def test_a_race_hold_counts_the_triggering_process_own_time() -> None:
    clock = _StoppedClock(started=100.0, waiting=0.3)
    holder = _Holder(until=100.5, hold=0.5, clock=clock)
    assert not holder.over(100.4)  # before the wall deadline
    assert not holder.over(100.6)  # 0.6 s wall, 0.3 s waiting: 0.3 s of its own
    assert holder.until == pytest.approx(100.8)  # the earliest it can be over now
    assert holder.over(100.81)
    starved = _Holder(until=100.5, hold=0.5, clock=_StoppedClock(started=100.0, waiting=99.0))
    assert not starved.over(100.0 + 0.5 * HOLD_MAX_STRETCH - 0.01)
    # never held beyond HOLD_MAX_STRETCH x the hold, and then cut short
    assert starved.over(100.0 + 0.5 * HOLD_MAX_STRETCH) and starved.cut


@pytest.fixture
def loaded_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(pinned_server=PINNED_SERVER)
    return guard_pytester


@needs_schedstat
def test_a_slow_start_on_a_busy_cpu_is_not_a_hang(loaded_pytester: pytest.Pytester) -> None:
    loaded_pytester.makepyfile(
        f"""
        import sys
        from pytest_startup_guard import cpu_load, ready

        def test_slow(server_fleet):
            with cpu_load(3, cpus=[{LOADED_CPU}], limit=60):
                fleet = server_fleet.launch(
                    [sys.executable, "pinned_server.py", "work:0.8", "{{port}}"],
                    ready=ready.log("listening"),
                    timeout=2.0,
                )
            server = fleet.servers[0]
            print("STATE", server.state, server.seconds_to_ready, server.seconds_waiting)
            assert server.state == "ready", fleet.summary()
            # It needed more than the time-out in wall time: a wall-clock deadline calls it hung.
            assert server.seconds_to_ready > 2.0, fleet.summary()
            assert server.seconds_waiting > 1.0
        """
    )
    result = loaded_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=1)


def test_a_hang_on_a_busy_cpu_is_still_a_hang(loaded_pytester: pytest.Pytester) -> None:
    loaded_pytester.makepyfile(
        f"""
        import sys
        from pytest_startup_guard import cpu_load, ready

        def test_hang(server_fleet):
            with cpu_load(3, cpus=[{LOADED_CPU}], limit=60):
                fleet = server_fleet.launch(
                    [sys.executable, "pinned_server.py", "sleep", "{{port}}"],
                    ready=ready.log("listening"),
                    timeout=1.5,
                )
            server = fleet.servers[0]
            assert server.state == "hung", fleet.summary()
            assert 1.5 <= server.seconds_to_timeout < 1.5 * 4, fleet.summary()
            assert "not ready after 1.5 s" in server.reason
        """
    )
    loaded_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


@needs_schedstat
def test_a_machine_too_slow_to_decide_is_undecided(loaded_pytester: pytest.Pytester) -> None:
    loaded_pytester.makepyfile(
        f"""
        import sys
        import pytest
        from pytest_startup_guard import cpu_load, ready

        @pytest.mark.startup_races(corrupt=["empty"])
        def test_case(startup_case, hub_cache, server_fleet):
            repo = hub_cache.add_model("acme/tiny", {{"config.json": {{"model_type": "gpt2"}}}})
            startup_case.apply(repo, "config.json")
            with cpu_load(7, cpus=[{LOADED_CPU}], limit=60):
                fleet = server_fleet.launch(
                    [sys.executable, "pinned_server.py", "spin", "{{port}}"],
                    ready=ready.log("listening"),
                    timeout=1.0,
                )
            startup_case.check(fleet)
        """
    )
    report = loaded_pytester.path / "report.json"
    result = loaded_pytester.runpytest_subprocess(
        "-p", "startup_guard", f"--startup-guard-report={report}"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*startup_case corrupt-empty on config.json of acme/tiny@main: UNDECIDED: the machine"
            " was too slow to decide whether the start-up failed closed:*",
            "*UNDECIDED: server 0: ready.log(*) not ready, but in * s (4 x the 1 s time-out) it"
            " had only * s of its own time: * s waiting for a CPU*",
        ]
    )
    import json

    test = json.loads(report.read_text())["tests"][0]
    assert test["verdict"]["undecided"] is True
    server = test["fleets"][0]["servers"][0]
    assert server["state"] == "undecided"
    assert server["seconds_waiting"] > 1.0


# -- stress rounds -----------------------------------------------------------------------

SEED_DEPENDENT = """
import os

def test_depends_on_the_seed(hub_race):
    assert hub_race.seed % 2 == 0, f"odd seed {hub_race.seed}"

def test_stable(hub_race):
    with open(os.environ["ROUNDS_FILE"], "a") as handle:
        handle.write(f"{hub_race.seed}\\n")

def test_not_a_startup_test():
    with open(os.environ["PLAIN_FILE"], "a") as handle:
        handle.write("ran\\n")
"""


def test_stress_fails_at_the_first_round_whose_verdict_differs(
    guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROUNDS_FILE", str(guard_pytester.path / "rounds.txt"))
    monkeypatch.setenv("PLAIN_FILE", str(guard_pytester.path / "plain.txt"))
    guard_pytester.makepyfile(test_stress=SEED_DEPENDENT)
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "--startup-guard-stress=12", "--startup-guard-seed=11", "-rA"
    )
    result.assert_outcomes(failed=1, passed=2)
    text = result.stdout.str()
    assert re.search(r"differs between rounds \(round (\d+) of 12\)", text), text
    result.stdout.fnmatch_lines(["*12 rounds, no verdict differed: 12 passed*"])
    seeds = (guard_pytester.path / "rounds.txt").read_text().split()
    assert len(seeds) == 12 and len(set(seeds)) == 12  # a derived seed per round
    assert (guard_pytester.path / "plain.txt").read_text() == "ran\n"  # other tests: once
    # Each round's replay command gives that round's verdict again.
    replays = re.findall(
        r"^  round \d+ \(run seed \d+\) (passed|failed).*\n    replay: (.+)$", text, re.M
    )
    assert {verdict for verdict, _ in replays} == {"passed", "failed"}, text
    for verdict, command in replays:
        args = command.split()[1:]  # without "pytest"
        again = guard_pytester.runpytest_subprocess(*args)
        again.assert_outcomes(**{verdict: 1})


def test_stress_rounds_under_xdist(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(
        """
        def test_stable(hub_race):
            assert hub_race.seed >= 0
        """
    )
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "xdist", "-n", "2", "--startup-guard-stress=3", "-rA"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*3 rounds, no verdict differed: 3 passed*"])


@pytest.mark.parametrize(
    ("where", "value"),
    [("--startup-guard-stress", "0"), ("STARTUP_GUARD_STRESS", "many")],
)
def test_a_bad_stress_value_is_a_clear_error(
    guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str, value: str
) -> None:
    guard_pytester.makepyfile("def test_x(hub_race): pass")
    args = ["-p", "startup_guard"]
    if where.startswith("--"):
        args.append(f"{where}={value}")
    else:
        monkeypatch.setenv(where, value)
    result = guard_pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*{where}*{value}*expected a whole number from 1 to 10000 (the number of rounds)*"]
    )
