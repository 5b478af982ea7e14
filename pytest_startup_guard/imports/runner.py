"""The one way ``imports`` runs fresh interpreters: sessions of one tree, read to their end.

``import_race`` (``probe``) and the start-method checks (``startmethods``) both start an
interpreter, or a start-up, per run, several at a time, and must leave nothing behind. Each run
is a session of its own (``runtime.process_group.session``), ended with everything in its group
when the run ends, and carries its call's tree marker (``STARTUP_GUARD_RUN``), by which what
left its session (a daemon) is ended on ``close()``, and by the run's reaper should pytest die.

The programs the probe runs are files in ``programs/``, passed with ``-c`` (``program_argv``).
Standard library only, besides the runtime's process groups and tree markers.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pytest_startup_guard.runtime.process_group import end_group, end_marked, session
from pytest_startup_guard.runtime.protocol import ANCESTRY_ENV, MEMBER_ENV, PLAN_ENV, RUN_ENV
from pytest_startup_guard.runtime.run_marker import new_tree
from pytest_startup_guard.wording import printable

DEFAULT_WORKERS = 2  # fresh interpreters at once (at most the machine's cores)
TAIL_CHARS = 2000
POLL_SECONDS = 0.02  # how often a run that is not done looks again
READ_WAIT = 5.0  # seconds the rest of a stopped run's output may take to arrive

PROGRAMS = Path(__file__).resolve().with_name("programs")
# The child runtime activates when its plan is in the environment; the probe is independent.
_STRIPPED_ENV = (PLAN_ENV, MEMBER_ENV, ANCESTRY_ENV)


@dataclass(frozen=True)
class Finished:
    """How one run ended: its exit code (None when killed: timed out, or stopped once ready)
    and its output (``stderr`` is empty when it was merged into ``stdout``)."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    ready: bool  # the ready pattern appeared in its output
    timed_out: bool

    def tail(self, chars: int = TAIL_CHARS) -> str:
        """The end of its output, ``printable`` (it is quoted in messages)."""
        text = (self.stdout + self.stderr).strip()
        return printable(text[-chars:])


class _Output:
    """A run's output, read line by line as it comes: one thread a pipe."""

    def __init__(self, process: subprocess.Popen[str], ready: re.Pattern[str] | None) -> None:
        self.ready = threading.Event()
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._readers = [self._reader(process.stdout, self._stdout, ready)]
        if process.stderr is not None:
            self._readers.append(self._reader(process.stderr, self._stderr, None))

    def _reader(
        self, pipe: IO[str] | None, lines: list[str], ready: re.Pattern[str] | None
    ) -> threading.Thread:
        def read() -> None:
            assert pipe is not None
            for line in pipe:
                lines.append(line)
                if ready is not None and not self.ready.is_set() and ready.search(line):
                    self.ready.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        return reader

    def reading(self) -> bool:
        return any(reader.is_alive() for reader in self._readers)

    def join(self, timeout: float | None) -> tuple[str, str]:
        """Wait up to ``timeout`` seconds (None: to its end) for the rest; stdout and stderr."""
        for reader in self._readers:
            reader.join(timeout)
        return "".join(self._stdout), "".join(self._stderr)


class Interpreters:
    """The runs of one call (an ``import_race``, a start-method check): one tree marker, and
    every run's session ended, with its group, when the run ends or on ``close()``.

    ``grace``: seconds a run still running when it ends (timed out, or stopped once ready)
    has between SIGTERM and SIGKILL; 0 kills it at once.
    """

    def __init__(
        self, env: Mapping[str, str], cwd: str | os.PathLike[str] | None, grace: float = 0.0
    ) -> None:
        self.marker = new_tree()  # one tree per call; starts the run's reaper, if there is one
        self.env = {**env, RUN_ENV: self.marker}
        self.cwd = cwd
        self.grace = grace
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen[str]] = set()

    def run(
        self,
        argv: Sequence[str],
        timeout: float,
        *,
        env: Mapping[str, str] | None = None,
        ready: re.Pattern[str] | None = None,
        merge_output: bool = False,
        read_to_end: bool = False,
    ) -> Finished:
        """Run ``argv`` (with ``env``, default ``self.env``) until it is done, its output
        matches ``ready``, or ``timeout`` seconds pass; then end its session.

        A run is done when it has exited; its output then gets ``READ_WAIT`` seconds more. With
        ``read_to_end`` it is done when it has exited and closed its output too, and a run
        stopped on time-out is read to its end (a report printed last is never cut off).
        ``merge_output`` reads stderr as part of stdout.
        """
        started = time.perf_counter()
        stderr = subprocess.STDOUT if merge_output else subprocess.PIPE
        environment = self.env if env is None else env
        # However the block ends, the session ends with it: SIGTERM while it still runs, SIGKILL
        # after ``grace`` seconds, and for whatever it left in its group.
        with session(
            argv, env=environment, cwd=self.cwd, stderr=stderr, grace=self.grace
        ) as process:
            with self._lock:
                self._live.add(process)
            try:
                output = _Output(process, ready)
                timed_out = _wait(process, output, started + timeout, read_to_end=read_to_end)
                stopped = timed_out or process.poll() is None
            finally:
                with self._lock:
                    self._live.discard(process)
        stdout, stderr_text = output.join(None if read_to_end else READ_WAIT)
        return Finished(
            returncode=None if stopped else process.returncode,
            stdout=stdout,
            stderr=stderr_text,
            seconds=time.perf_counter() - started,
            ready=output.ready.is_set(),
            timed_out=timed_out,
        )

    def close(self) -> None:
        """End every session still running, and every process that carries the call's marker
        (SIGTERM, then SIGKILL after ``grace``; at once without it)."""
        with self._lock:
            live = list(self._live)
        for process in live:
            end_group(process, marker=self.marker)
        end_marked(self.marker, self.grace)


def _wait(
    process: subprocess.Popen[str], output: _Output, deadline: float, *, read_to_end: bool
) -> bool:
    """Wait until the run is done or ready; whether ``deadline`` passed first."""
    while process.poll() is None or (read_to_end and output.reading()):
        if output.ready.is_set():
            return False
        if time.perf_counter() >= deadline:
            return True
        output.ready.wait(POLL_SECONDS)
    return False


def program_argv(python: str, name: str, *args: str) -> list[str]:
    """``python -c <programs/NAME.py's text> ARGS``.

    ``-c``, not the file's path nor ``-m``: the cwd stays first on ``sys.path`` (where the
    module under test may be), the program's folder stays off it, and ``python`` need not have
    this package installed.
    """
    return [python, "-c", (PROGRAMS / f"{name}.py").read_text(), *args]


def child_env(
    extra: Mapping[str, str] | None = None, pythonpath: Iterable[str | os.PathLike[str]] = ()
) -> dict[str, str]:
    """The environment of a fresh interpreter: this one's, without the child runtime's plan."""
    env = {key: value for key, value in os.environ.items() if key not in _STRIPPED_ENV}
    paths = [os.fspath(path) for path in pythonpath]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def default_workers() -> int:
    """How many fresh interpreters run at once by default: two, at most the cores."""
    return max(1, min(DEFAULT_WORKERS, os.cpu_count() or 1))


def last_error_line(text: str) -> str:
    """The last line that looks like ``SomeError: message`` (a traceback's last line),
    ``printable``."""
    for line in reversed(text.strip().splitlines()):
        if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b", line.strip()):
            return printable(line.strip())
    lines = text.strip().splitlines()
    return printable(lines[-1].strip()) if lines else ""
