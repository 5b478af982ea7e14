"""Every process that starts up is judged: a supervisor's workers, each on its own fate.

The supervisor (tests/worker_server.py) answers its probe at once whatever its workers do, as a
server on a shared socket does: before, the member's probe was the whole verdict. Each test
runs pytest as users do and checks the outcome and the words against what each process did.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_startup_guard.fleet.workers import exception_lines

HERE = Path(__file__).resolve().parent

COMMON = f"""
import re
import sys
import pytest
from pytest_startup_guard import ready

CONFIG = {{"config.json": {{"model_type": "gpt2", "n_layer": 3}}}}

def launch(server_fleet, mode, **kwargs):
    return server_fleet.launch(
        [sys.executable, {str(HERE / "worker_server.py")!r}, "{{port}}", mode],
        ready=ready.http("/health"), timeout=30, **kwargs,
    )
"""


@pytest.fixture
def workers_pytester(guard_pytester: pytest.Pytester) -> pytest.Pytester:
    guard_pytester.makepyfile(common=COMMON)
    guard_pytester.syspathinsert()
    return guard_pytester


def test_a_dead_worker_fails_the_member_that_answered_its_probe(
    workers_pytester: pytest.Pytester,
) -> None:
    workers_pytester.makepyfile(
        """
        from common import *

        def test_dead_worker(hub_cache, server_fleet):
            hub_cache.add_model("acme/tiny", CONFIG)
            fleet = launch(server_fleet, "dies_before_ready", workers=1)
            assert fleet.servers[0].ready  # its probe passed: the supervisor serves
            fleet.assert_all_ready()
        """
    )
    result = workers_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert re.search(r"worker pid \d+ of server 0 exited with code 1 after [\d.]+ s", output)
    assert "OSError: worker 1: can't load the configuration: config.json vanished" in output
    assert "1 of 2 workers FAILED" in output


def test_a_worker_that_dies_after_readiness_fails_at_teardown(
    workers_pytester: pytest.Pytester,
) -> None:
    workers_pytester.makepyfile(
        """
        import time
        from common import *

        def test_dies_later(hub_cache, server_fleet):
            hub_cache.add_model("acme/tiny", CONFIG)
            fleet = launch(server_fleet, "dies_after_ready")
            assert fleet.servers[0].ready
            time.sleep(3)  # the test goes on; its worker dies meanwhile
        """
    )
    result = workers_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1, errors=1)
    output = result.stdout.str()
    assert re.search(
        r"worker pid \d+ of server 0 exited with code 1 after [\d.]+ s, [\d.]+ s after the"
        r" server was ready: OSError",
        output,
    )


def test_workers_n_waits_until_every_worker_is_up(workers_pytester: pytest.Pytester) -> None:
    workers_pytester.makepyfile(
        """
        from common import *

        def test_slow_worker(hub_cache, server_fleet):
            hub_cache.add_model("acme/tiny", CONFIG)
            fleet = launch(server_fleet, "slow_worker", workers=2)
            (server,) = fleet.servers
            up = fleet.workers_up(server)
            assert len(up) == 2, server.workers
            # Worker 1 reads its config 1 s late: the member cannot be ready before that.
            assert server.seconds_to_ready > 1.0
            fleet.assert_all_ready()
        """
    )
    workers_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


def test_short_helpers_and_idle_workers_are_not_failures(
    workers_pytester: pytest.Pytester,
) -> None:
    workers_pytester.makepyfile(
        """
        from common import *

        def test_helpers(hub_cache, server_fleet):
            hub_cache.add_model("acme/tiny", CONFIG)
            fleet = launch(server_fleet, "short_helpers", workers=1)
            fleet.assert_all_ready()
            (server,) = fleet.servers
            ended = {w.exit_code for w in server.workers if w.ended}
            assert ended == {0, 1}, server.workers  # both really ended, and were not judged
            assert server.started_up
        """
    )
    workers_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


def test_a_supervisor_that_gives_up_is_not_called_a_daemon(
    workers_pytester: pytest.Pytester,
) -> None:
    workers_pytester.makepyfile(
        """
        from common import *

        def test_gives_up(hub_cache, server_fleet):
            hub_cache.add_model("acme/tiny", CONFIG)
            fleet = launch(server_fleet, "gives_up")
            (server,) = fleet.servers
            assert (server.state, server.returncode) == ("exited", 0)
            print("REASON:", server.reason)
            assert "forked into the background" not in server.reason
            assert "its supervisor gave up" in server.reason
        """
    )
    result = workers_pytester.runpytest_subprocess("-p", "startup_guard", "-s")
    result.assert_outcomes(passed=1)


def test_a_member_that_leaves_a_server_behind_is_called_a_daemon(
    workers_pytester: pytest.Pytester,
) -> None:
    workers_pytester.makepyfile(
        """
        from common import *

        def test_daemonizes(hub_cache, server_fleet):
            hub_cache.add_model("acme/tiny", CONFIG)
            fleet = server_fleet.launch(
                [sys.executable, "-c",
                 "import os, socket, time\\n"
                 "if os.fork() == 0:\\n"
                 "    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); time.sleep(60)\\n"
                 "time.sleep(0.5)\\n"],
                ready=ready.log("never"), timeout=20,
            )
            (server,) = fleet.servers
            assert server.returncode == 0
            assert "forked into the background" in server.reason, server.reason
            assert re.search(r"left worker pid \\d+ running", server.reason), server.reason
        """
    )
    workers_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


@pytest.mark.parametrize("value", [0, -1, 1.5, "4", True])
def test_a_bad_workers_value_is_a_clear_error(
    workers_pytester: pytest.Pytester, value: object
) -> None:
    workers_pytester.makepyfile(
        f"""
        from common import *

        def test_bad(server_fleet):
            with pytest.raises((ValueError, TypeError)) as caught:
                launch(server_fleet, "clean", workers={value!r})
            message = str(caught.value)
            assert "workers" in message and "server_fleet.launch()" in message, message
            assert {str(value)!r} in message, message
        """
    )
    workers_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)


def test_exception_lines_put_the_raced_file_first() -> None:
    output = "\n".join(
        [
            "INFO starting",
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
            "ValueError: Unrecognized model in /cache/acme/tiny",
            "Traceback (most recent call last):",
            "OSError: Can't load the configuration of '/cache/config.json'",
            "OSError: Can't load the configuration of '/cache/config.json'",
            "gunicorn.errors.HaltServer: <HaltServer 'Worker failed to boot.' 3>",
        ]
    )
    assert exception_lines(output, ["config.json"]) == [
        "OSError: Can't load the configuration of '/cache/config.json'",
        "ValueError: Unrecognized model in /cache/acme/tiny",
    ]  # HaltServer is how gunicorn gives up, not why: not an exception line here
