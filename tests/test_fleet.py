"""server_fleet: N real processes at once, readiness, fail-fast, clear failures, nothing left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from survivors import assert_none_alive, recorded_pids

ROOT = Path(__file__).resolve().parent.parent
CONFIG_SERVER = ROOT / "examples" / "servers" / "config_server.py"

COMMON = f"""
import json, os, sys, time
from pathlib import Path
import pytest
from pytest_startup_guard import ready

SERVER = [sys.executable, {str(CONFIG_SERVER)!r}, "--model", "acme/tiny", "--port", "{{port}}"]
CONFIG = {{"config.json": {{"model_type": "gpt2", "n_layer": 3}}}}

def record(fleet):
    '''Write every pid of the fleet's trees, for the outer test to check nothing survives.'''
    import psutil
    pids = set()
    for server in fleet.servers:
        pids |= fleet.members_pids(server)
        try:
            pids |= {{c.pid for c in psutil.Process(server.pid).children(recursive=True)}}
        except psutil.Error:
            pass
    with open(os.environ["FLEET_PIDS"], "a") as out:
        out.write("".join(f"{{pid}}\\n" for pid in pids))
"""


@pytest.fixture
def fleet_pytester(
    guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    monkeypatch.setenv("FLEET_PIDS", str(guard_pytester.path / "fleet-pids.txt"))
    guard_pytester.makepyfile(common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


def test_four_config_servers_come_up_on_the_hub_cache(fleet_pytester: pytest.Pytester) -> None:
    fleet_pytester.makepyfile(
        """
        from common import *

        def test_four(hub_cache, server_fleet):
            hub_cache.add_model("acme/tiny", CONFIG)
            fleet = server_fleet.launch(
                SERVER, count=4, ready=ready.http("/config", expect=lambda body: json.loads(body)["n_layer"] == 3)
            )
            record(fleet)
            fleet.assert_all_ready()
            ports = [s.port for s in fleet.servers]
            assert len(set(ports)) == 4 and all(20000 <= p < 32768 for p in ports)
            for server in fleet.servers:
                assert server.ready and server.returncode is None and 0 < server.seconds_to_ready < 60
                assert "serving gpt2 on http://127.0.0.1:%d" % server.port in server.output
                assert server.hits == []
            # the plan reached every member: each reported its accesses of the cache
            members = {server.member for server in fleet.servers}
            assert members == {e.member for e in server_fleet.controller.accesses}
        """
    )
    result = fleet_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)
    assert_none_alive(recorded_pids(fleet_pytester))


def test_a_member_that_exits_ends_only_its_own_wait(fleet_pytester: pytest.Pytester) -> None:
    fleet_pytester.makepyfile(
        """
        from common import *

        CODE = "import sys, time; i = int(sys.argv[1]); print('dying' if i == 2 else 'up', flush=True); sys.exit(3) if i == 2 else time.sleep(1.0); print('ready', flush=True); time.sleep(60)"

        def test_fail_fast(server_fleet):
            started = time.monotonic()
            fleet = server_fleet.launch([sys.executable, "-c", CODE, "{index}"], count=4, ready=ready.log("^ready$"), timeout=30)
            record(fleet)
            assert time.monotonic() - started < 20
            crashed = fleet.servers[2]
            assert (crashed.state, crashed.returncode, crashed.ready) == ("exited", 3, False)
            assert crashed.seconds_to_exit < 1.0  # noticed at once, not at the time-out
            for server in fleet.servers[:2] + fleet.servers[3:]:
                assert server.ready and server.seconds_to_ready >= 0.9
            with pytest.raises(AssertionError) as raised:
                fleet.assert_all_ready()
            message = str(raised.value)
            assert "3 of 4 ready within 30 s" in message
            assert "server 2  pid %d  EXITED with code 3" % crashed.pid in message
            for server in fleet.servers:
                assert "server %d  pid %d" % (server.index, server.pid) in message
            assert "| dying" in message
        """
    )
    fleet_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)
    assert_none_alive(recorded_pids(fleet_pytester))


def test_every_probe_kind(fleet_pytester: pytest.Pytester) -> None:
    fleet_pytester.makepyfile(
        """
        from common import *

        HTTP = (
            "import sys, json, http.server\\n"
            "class H(http.server.BaseHTTPRequestHandler):\\n"
            "    def do_GET(self):\\n"
            "        body = json.dumps({'model_type': sys.argv[2]}).encode()\\n"
            "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)\\n"
            "    def log_message(self, *a): pass\\n"
            "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\\n"
        )

        def test_tcp_and_http(server_fleet):
            fleet = server_fleet.launch([sys.executable, "-c", HTTP, "{port}", "gpt2"], count=2, ready=ready.tcp())
            record(fleet)
            fleet.assert_all_ready()
            fleet = server_fleet.launch([sys.executable, "-c", HTTP, "{port}", "gpt2"], count=2,
                                        ready=ready.http("/config", expect=lambda b: json.loads(b)["model_type"] == "gpt2"))
            record(fleet)
            fleet.assert_all_ready()

        def test_expect_rejects_a_server_that_came_up_wrong(server_fleet):
            fleet = server_fleet.launch([sys.executable, "-c", HTTP, "{port}", "fallback"], count=2, timeout=20,
                                        ready=ready.http("/config", expect=lambda b: json.loads(b)["model_type"] == "gpt2"))
            record(fleet)
            assert [s.state for s in fleet.servers] == ["rejected", "rejected"]
            assert all(s.returncode is None for s in fleet.servers)  # up, but wrong
            with pytest.raises(AssertionError, match="came up WRONG: GET /config answered 200 but expect\\\\(\\\\) rejected"):
                fleet.assert_all_ready()

        def test_file_log_and_call(server_fleet, tmp_path):
            flag = tmp_path / "ready-{index}"
            code = f"import time, sys; time.sleep(0.3); open({str(flag)!r}.format(index=sys.argv[1]), 'w').close(); print('up', flush=True); time.sleep(60)"
            fleet = server_fleet.launch([sys.executable, "-c", code, "{index}"], count=2, ready=ready.file(str(flag)))
            record(fleet)
            fleet.assert_all_ready()
            fleet = server_fleet.launch([sys.executable, "-c", code, "{index}"], count=2, ready=ready.log("up"))
            record(fleet)
            fleet.assert_all_ready()
            seen = []
            fleet = server_fleet.launch([sys.executable, "-c", code, "{index}"], count=2,
                                        ready=ready.call(lambda m: seen.append(m.index) or os.path.exists(str(flag).format(index=m.index))))
            record(fleet)
            fleet.assert_all_ready()
            assert set(seen) == {0, 1}
        """
    )
    fleet_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=3)
    assert_none_alive(recorded_pids(fleet_pytester))


def test_a_hung_server_times_out_with_its_stacks(fleet_pytester: pytest.Pytester) -> None:
    fleet_pytester.makepyfile(
        """
        from common import *

        CODE = "import time\\ndef wait_for_config_forever():\\n    while True: time.sleep(0.05)\\nwait_for_config_forever()\\n"

        def test_hang(server_fleet):
            started = time.monotonic()
            fleet = server_fleet.launch([sys.executable, "-c", CODE], count=2, ready=ready.log("never"), timeout=2)
            record(fleet)
            assert 1.9 < time.monotonic() - started < 15
            assert [s.state for s in fleet.servers] == ["hung", "hung"]
            fleet.assert_all_ready()
        """
    )
    result = fleet_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*0 of 2 ready within 2 s*",
            "*server 0  pid *  HUNG: not ready and still running at the time-out (ready.log('never') not ready after 2 s*",
            "*python stacks of pid *",
            "*in wait_for_config_forever*",
        ]
    )
    assert_none_alive(recorded_pids(fleet_pytester))


def test_clear_failures_for_bad_commands_and_ports(fleet_pytester: pytest.Pytester) -> None:
    fleet_pytester.makepyfile(
        """
        import socket
        from common import *
        from pytest_startup_guard import StartupGuardError

        def test_missing_command(server_fleet):
            with pytest.raises(StartupGuardError, match="command 'no-such-server' \\\\(argv\\\\[0\\\\] of server_fleet.launch\\\\) does not exist: not found on PATH="):
                server_fleet.launch(["no-such-server", "--port", "{port}"], ready=ready.tcp())

        def test_unknown_placeholder(server_fleet):
            with pytest.raises(ValueError, match="unknown placeholder {model} in argv\\\\[2\\\\]"):
                server_fleet.launch([sys.executable, "-c", "{model}"], ready=ready.tcp())

        def test_port_in_use(server_fleet):
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            with pytest.raises(StartupGuardError, match=f"port {port} \\\\(ports\\\\[0\\\\]\\\\) is in use on 127.0.0.1 by pid {os.getpid()}"):
                server_fleet.launch([sys.executable, "-c", "pass", "{port}"], ready=ready.tcp(), ports=[port])
            listener.close()

        def test_server_that_cannot_bind_its_port(server_fleet):
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            taken = listener.getsockname()[1]
            code = f"import socket; s = socket.socket(); s.bind(('127.0.0.1', {taken}))"
            fleet = server_fleet.launch([sys.executable, "-c", code, "{port}"], ready=ready.tcp(), timeout=20)
            record(fleet)
            (server,) = fleet.servers
            assert server.state == "exited" and server.returncode == 1
            assert "Address already in use" in server.output

        def test_prints_nothing_and_exits_zero(server_fleet):
            fleet = server_fleet.launch([sys.executable, "-c", "pass"], ready=ready.log("up"), timeout=20)
            record(fleet)
            (server,) = fleet.servers
            assert (server.state, server.returncode) == ("exited", 0)
            assert server.reason == "it printed nothing; a server should keep running; it exited 0 instead"

        def test_forks_and_exits_its_parent(server_fleet):
            # The child it leaves listens on a port: it still serves, from the background.
            code = "import os, socket, time\\nif os.fork() == 0:\\n    s = socket.socket()\\n    s.bind(('127.0.0.1', 0))\\n    s.listen()\\n    time.sleep(60)\\nelse:\\n    time.sleep(0.5)\\n    print('daemonized', flush=True)\\n"
            fleet = server_fleet.launch([sys.executable, "-c", code], ready=ready.log("never"), timeout=20)
            record(fleet)
            (server,) = fleet.servers
            assert server.state == "exited" and server.returncode == 0
            assert "the server forked into the background; run it in the foreground" in server.reason
        """
    )
    fleet_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=6)
    assert_none_alive(recorded_pids(fleet_pytester))


def test_a_command_that_starts_several_servers_is_one_member(
    fleet_pytester: pytest.Pytester,
) -> None:
    fleet_pytester.makepyfile(
        """
        from common import *
        import multiprocessing

        LAUNCHER = '''
        import multiprocessing, sys, time
        from transformers import AutoConfig

        def engine(done):
            try:
                AutoConfig.from_pretrained("acme/tiny")
            except Exception as error:  # the race hit this engine
                print("engine:", type(error).__name__, flush=True)
            done.put(1)
            time.sleep(60)

        if __name__ == "__main__":
            context = multiprocessing.get_context("spawn")
            done = context.Queue()
            engines = [context.Process(target=engine, args=(done,)) for _ in range(2)]
            for e in engines:
                e.start()
            done.get(), done.get()
            print("engines up", flush=True)
            time.sleep(60)
        '''

        def test_engines_are_under_test(hub_cache, hub_race, server_fleet, tmp_path):
            repo = hub_cache.add_model("acme/tiny", CONFIG)
            launcher = tmp_path / "launcher.py"
            import textwrap
            launcher.write_text(textwrap.dedent(LAUNCHER))
            hub_race.arm("pointer_swap", repo, "config.json", allow_miss=True)
            fleet = server_fleet.launch([sys.executable, str(launcher)], count=1, ready=ready.log("engines up"))
            record(fleet)
            fleet.assert_all_ready()
            (server,) = fleet.servers
            engine_pids = fleet.members_pids(server) - {server.pid}
            assert len(engine_pids) == 2
            assert {hit.pid for hit in server.hits} == engine_pids
        """
    )
    fleet_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)
    assert_none_alive(recorded_pids(fleet_pytester))


LONG_RUNNING = """
from common import *

CODE = "import time; print('up', flush=True); time.sleep(300)"
"""


@pytest.mark.parametrize(
    ("body", "args", "outcome"),
    [
        ("fleet.assert_all_ready()", [], {"passed": 1}),
        ("assert False, 'a failing assertion'", [], {"failed": 1}),
        (
            "time.sleep(30)",
            ["-p", "timeout", "--timeout=3", "--timeout-method=signal"],
            {"failed": 1},
        ),
        ("time.sleep(30)", ["-p", "timeout", "--timeout=3", "--timeout-method=thread"], None),
    ],
    ids=["success", "failed-assertion", "pytest-timeout-signal", "pytest-timeout-thread"],
)
def test_no_process_survives_its_test(
    fleet_pytester: pytest.Pytester, body: str, args: list[str], outcome: dict[str, int] | None
) -> None:
    fleet_pytester.makepyfile(
        LONG_RUNNING
        + f"""
def test_fleet(server_fleet):
    fleet = server_fleet.launch([sys.executable, "-c", CODE], count=3, ready=ready.log("up"))
    record(fleet)
    {body}
"""
    )
    result = fleet_pytester.runpytest_subprocess("-p", "startup_guard", *args, timeout=120)
    if outcome is not None:
        result.assert_outcomes(**outcome)
    pids = recorded_pids(fleet_pytester)
    assert len(pids) >= 3
    assert_none_alive(pids)


def test_no_process_survives_a_fleet_time_out_or_sigint(
    fleet_pytester: pytest.Pytester, tmp_path: Path
) -> None:
    fleet_pytester.makepyfile(
        LONG_RUNNING
        + """
def test_timeout(server_fleet):
    fleet = server_fleet.launch([sys.executable, "-c", CODE], count=2, ready=ready.log("never"), timeout=1)
    record(fleet)
    fleet.assert_all_ready()

def test_interrupted(server_fleet):
    fleet = server_fleet.launch([sys.executable, "-c", CODE], count=2, ready=ready.log("up"))
    record(fleet)
    open(os.environ["FLEET_PIDS"] + ".launched", "w").close()
    time.sleep(300)
"""
    )
    result = fleet_pytester.runpytest_subprocess("-p", "startup_guard", "-k", "timeout")
    result.assert_outcomes(failed=1)
    assert_none_alive(recorded_pids(fleet_pytester))
    marker = Path(os.environ["FLEET_PIDS"] + ".launched")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "startup_guard",
        "-k",
        "interrupted",
        str(fleet_pytester.path),
    ]
    # Ctrl-C as at a terminal: SIGINT at its default, whatever this worker inherited or was
    # left with (an ignored SIGINT survives exec, and the pytest under test would never see it).
    pytest_process = subprocess.Popen(
        command,
        cwd=fleet_pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "the fleet never launched"
    pytest_process.send_signal(signal.SIGINT)
    output = pytest_process.communicate(timeout=60)[0].decode()
    assert "KeyboardInterrupt" in output
    pids = recorded_pids(fleet_pytester)
    assert len(pids) >= 4
    assert_none_alive(pids)


def test_no_process_survives_under_xdist(fleet_pytester: pytest.Pytester) -> None:
    fleet_pytester.makepyfile(
        LONG_RUNNING
        + """
@pytest.mark.parametrize("n", range(4))
def test_fleet(server_fleet, n):
    fleet = server_fleet.launch([sys.executable, "-c", CODE, "{port}"], count=2, ready=ready.log("up"))
    record(fleet)
    fleet.assert_all_ready()
    assert n != 3, "one failure among them"
"""
    )
    result = fleet_pytester.runpytest_subprocess("-p", "startup_guard", "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=3, failed=1)
    pids = recorded_pids(fleet_pytester)
    assert len(pids) == 8
    assert_none_alive(pids)


def test_stop_kills_what_ignores_sigterm(fleet_pytester: pytest.Pytester) -> None:
    fleet_pytester.makepyfile(
        """
        from common import *

        CODE = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(300)"

        def test_stop(server_fleet):
            fleet = server_fleet.launch([sys.executable, "-c", CODE], count=2, ready=ready.log("up"))
            record(fleet)
            started = time.monotonic()
            fleet.stop(grace=0.5)
            assert time.monotonic() - started < 5
            assert [s.returncode for s in fleet.servers] == [-9, -9]
        """
    )
    fleet_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)
    assert_none_alive(recorded_pids(fleet_pytester))


def test_timeout_mark_only_where_the_user_set_none(fleet_pytester: pytest.Pytester) -> None:
    fleet_pytester.makepyfile(
        """
        import pytest

        def test_default(server_fleet, request):
            assert request.node.get_closest_marker("timeout").args == (2 * 60 * 4 + 30,)
            server_fleet.launch
            if False:
                server_fleet.launch([], ready=None)
                server_fleet.launch([], ready=None)

        @pytest.mark.timeout(7)
        def test_users_marker(server_fleet, request):
            assert request.node.get_closest_marker("timeout").args == (7,)

        def test_not_a_fleet_test(request):
            assert request.node.get_closest_marker("timeout") is None
        """
    )
    result = fleet_pytester.runpytest_subprocess("-p", "startup_guard", "-p", "timeout")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_users_marker: pytest-timeout's 7 s (its timeout marker) is shorter than the fleet readiness time-out 60 s*"
        ]
    )
    with_global = fleet_pytester.runpytest_subprocess(
        "-p", "startup_guard", "-p", "timeout", "--timeout=600", "-k", "default"
    )
    with_global.assert_outcomes(failed=1)  # the user's --timeout wins: no mark is added
