"""How each Python process under the plan ended: its exit code or signal, and its cause.

Every test runs real processes under a controller: the process says bye as it exits (the
status it knows, its first uncaught exception), and a Python parent under the plan reports each
child it reaps, which is the truth and wins.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    ProcessRecord,
)

TIMEOUT = 30.0


@pytest.fixture
def controller() -> Iterator[RuntimeController]:
    with RuntimeController() as controller:
        yield controller


def run(controller: RuntimeController, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` under the plan; its output, and a record that it reported in."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env={**os.environ, **controller.env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert controller.history, f"the child never reported in: not under the runtime\n{done.stderr}"
    return done


def fate(controller: RuntimeController, pid: int) -> ProcessRecord:
    record = controller.fate(pid, timeout=TIMEOUT)
    assert record is not None, f"pid {pid} never said hello"
    assert record.gone_t is not None, f"pid {pid} is still connected"
    return record


def only_child(controller: RuntimeController, done: subprocess.CompletedProcess[str]) -> int:
    """The pid of the one process the run started (the processes' own pids are not told)."""
    (record,) = controller.history
    assert fate(controller, record.pid).gone_t is not None
    return record.pid


def test_an_uncaught_exception_is_exit_code_1_and_the_cause(
    controller: RuntimeController,
) -> None:
    done = run(controller, "raise OSError(28, 'No space left on device')")
    assert done.returncode == 1
    record = fate(controller, only_child(controller, done))
    assert (record.exit_code, record.exit_known) == (1, "bye")
    assert record.cause == "OSError: [Errno 28] No space left on device"
    assert record.bye_t is not None and record.ended_t == min(record.bye_t, record.gone_t or 0)


def test_a_long_cause_is_one_line_of_at_most_500_characters(
    controller: RuntimeController,
) -> None:
    done = run(controller, "raise ValueError('line\\n' * 1000)")
    assert done.returncode == 1
    cause = fate(controller, only_child(controller, done)).cause
    assert cause is not None and cause.startswith("ValueError: line line line")
    assert len(cause) <= 500 and "\n" not in cause and cause.endswith("...")


@pytest.mark.parametrize(
    ("ending", "returncode", "said"),
    [
        ("sys.exit(3)", 3, 3),
        ("sys.exit(0)", 0, 0),
        ("sys.exit()", 0, 0),
        ("sys.exit('fatal: no config')", 1, 1),
        ("sys.exit(-1)", 255, 255),
        ("raise SystemExit(3)", 3, None),  # no sys.exit: the status is not seen
        ("pass", 0, None),  # nor at the end of a program: only its parent knows
    ],
)
def test_the_status_a_process_says_it_exits_with(
    controller: RuntimeController, ending: str, returncode: int, said: int | None
) -> None:
    done = run(controller, f"import sys\n{ending}")
    assert done.returncode == returncode
    record = fate(controller, only_child(controller, done))
    assert record.bye_t is not None, "no bye"
    assert (record.bye_code, record.exit_code) == (said, said)
    assert record.exit_known == ("" if said is None else "bye")
    assert record.cause is None
    assert record.ended_t is not None


def test_a_clean_exit_reaped_by_its_python_parent_is_0(controller: RuntimeController) -> None:
    done = run(
        controller,
        """
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        print(child.pid, child.wait())
        sys.exit(0)
        """,
    )
    assert done.returncode == 0, done.stderr
    child_pid, returncode = map(int, done.stdout.split())
    assert returncode == 0
    (parent,) = [record for record in controller.history if record.pid != child_pid]
    assert (fate(controller, parent.pid).exit_code, parent.exit_known) == (0, "bye")
    child = fate(controller, child_pid)
    assert (child.exit_code, child.exit_known) == (0, "reaped")
    assert child.bye_t is not None and child.bye_code is None  # it could not tell by itself
    assert child.reaped_t is not None and child.cause is None


def test_a_fork_worker_that_calls_os_exit(controller: RuntimeController) -> None:
    done = run(
        controller,
        """
        import multiprocessing, os, sys
        worker = multiprocessing.get_context("fork").Process(target=os._exit, args=(4,))
        worker.start()
        worker.join()
        print(worker.pid, worker.exitcode)
        """,
    )
    assert done.returncode == 0, done.stderr
    worker_pid, exitcode = map(int, done.stdout.split())
    assert exitcode == 4
    parent = next(record for record in controller.history if record.pid != worker_pid)
    fate(controller, parent.pid)  # the parent reports its reaps before it is gone
    worker = fate(controller, worker_pid)
    assert worker.forked
    assert worker.bye_code == 4  # os._exit skips the exit handlers, its wrapper said bye
    assert (worker.exit_code, worker.exit_known) == (4, "reaped")
    assert worker.bye_t is not None and worker.reaped_t is not None
    assert worker.ended_t == min(worker.bye_t, worker.reaped_t)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_the_exception_a_multiprocessing_worker_dies_of_is_its_cause(
    controller: RuntimeController, tmp_path: Path, method: str
) -> None:
    """``BaseProcess._bootstrap`` catches and prints what the target raises, and the worker
    exits with 1 without any excepthook: the child runtime notes it on its way there."""
    script = tmp_path / "workers.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import multiprocessing

            def work():
                raise ValueError("model weights are corrupt")

            if __name__ == "__main__":
                worker = multiprocessing.get_context({method!r}).Process(target=work)
                worker.start()
                worker.join()
                print(worker.pid, worker.exitcode)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, **controller.env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert "ValueError: model weights are corrupt" in done.stderr  # still printed
    worker_pid, exitcode = map(int, done.stdout.split())
    assert exitcode == 1
    for record in controller.history:
        fate(controller, record.pid)
    worker = fate(controller, worker_pid)
    assert worker.cause == "ValueError: model weights are corrupt"
    assert worker.bye_code == 1
    assert (worker.exit_code, worker.exit_known) == (1, "reaped")


@pytest.mark.parametrize("wait", ["Popen.wait", "os.waitid"])
def test_a_child_killed_by_sigkill_is_minus_9_from_its_parents_reap(
    controller: RuntimeController, wait: str
) -> None:
    reap = "child.wait()" if wait == "Popen.wait" else "os.waitid(os.P_PID, child.pid, os.WEXITED)"
    done = run(
        controller,
        f"""
        import os, subprocess, sys
        python = subprocess.Popen(
            [sys.executable, "-c", "print('up', flush=True); input()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        python.stdout.readline()  # it said hello before it printed
        other = subprocess.Popen(["sleep", "30"])  # not Python: it never says hello
        for child in (python, other):
            child.kill()
            {reap}
        print(python.pid, other.pid)
        """,
    )
    assert done.returncode == 0, done.stderr
    python_pid, other_pid = map(int, done.stdout.split())
    parent = next(record for record in controller.history if record.pid != python_pid)
    fate(controller, parent.pid)
    child = fate(controller, python_pid)
    assert (child.exit_code, child.exit_known) == (-9, "reaped")
    assert child.bye_t is None  # killed: no word from it
    assert child.reaped_t is not None and child.gone_t is not None
    assert child.ended_t == min(child.reaped_t, child.gone_t)  # its connection closed at the kill
    assert controller.reaped[other_pid][0] == -9
    assert python_pid not in controller.reaped
    assert controller.fate(other_pid) is None


def test_a_threads_uncaught_exception_is_the_cause(controller: RuntimeController) -> None:
    done = run(
        controller,
        """
        import sys, threading
        worker = threading.Thread(target=lambda: {}["model.safetensors"])
        worker.start()
        worker.join()
        raise RuntimeError("the server gave up")  # later: not the cause
        """,
    )
    assert done.returncode == 1
    assert "KeyError: 'model.safetensors'" in done.stderr  # still printed by the hook
    record = fate(controller, only_child(controller, done))
    assert record.cause == "KeyError: 'model.safetensors'"
    assert (record.exit_code, record.exit_known) == (1, "bye")


def test_a_threads_exception_alone_does_not_end_the_process(
    controller: RuntimeController,
) -> None:
    done = run(
        controller,
        """
        import sys, threading
        worker = threading.Thread(target=lambda: 1 / 0)
        worker.start()
        worker.join()
        sys.exit(0)
        """,
    )
    assert done.returncode == 0
    record = fate(controller, only_child(controller, done))
    assert record.cause == "ZeroDivisionError: division by zero"
    assert (record.exit_code, record.exit_known) == (0, "bye")


def test_an_exec_keeps_its_pid_and_is_not_an_exit(controller: RuntimeController) -> None:
    done = run(
        controller,
        """
        import os, sys
        os.execv(sys.executable, [sys.executable, "-c", "import sys; sys.exit(7)"])
        """,
    )
    assert done.returncode == 7
    before, after = controller.history
    assert before.pid == after.pid
    record = fate(controller, before.pid)
    assert record is after and controller.processes[before.pid] is after
    assert before.exec_t == after.hello_t
    assert before.gone_t is not None  # its connection closed at the exec
    assert before.ended_t is None and before.bye_t is None and before.exit_code is None
    assert (after.exit_code, after.exit_known) == (7, "bye")
    assert after.ended_t is not None


def test_an_exec_reaped_by_its_parent_ends_as_its_last_program(
    controller: RuntimeController,
) -> None:
    exec_into = "import os, sys; os.execv(sys.executable, [sys.executable, '-c', 'import os; os.kill(os.getpid(), 15)'])"
    done = run(
        controller,
        f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", {exec_into!r}])
        print(child.pid, child.wait())
        """,
    )
    assert done.returncode == 0, done.stderr
    child_pid, returncode = map(int, done.stdout.split())
    assert returncode == -15
    parent = next(record for record in controller.history if record.pid != child_pid)
    fate(controller, parent.pid)
    before, after = [record for record in controller.history if record.pid == child_pid]
    assert (after.exit_code, after.exit_known) == (-15, "reaped")
    assert before.exit_code is None and before.exec_t is not None and before.ended_t is None
