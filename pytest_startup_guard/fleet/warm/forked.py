"""``ForkedProcess``: a fleet member forked from a warm template, as the fleet sees a ``Popen``.

The member is the template's child, not ours: its exit code comes from the template's
``exit PID CODE`` report (the template reaps it), and nothing here may ``waitpid`` it. The small
interface the fleet uses of ``subprocess.Popen`` is here (``pid``, ``returncode``, ``poll``,
``wait``, ``send_signal``, ``terminate``, ``kill``), and what ``Fleet.stop`` needs to end its tree
(``target``, ``group``): a signal goes to the member only while the template has not reported
its end and its pid still has the start time it was forked with; to its process group, only
then or while a process in the group carries the fleet's or the template's marker.
"""

from __future__ import annotations

import signal
import threading
import time

from pytest_startup_guard.runtime.process_group import Group, Verified
from pytest_startup_guard.runtime.process_identity import proc_stat, running, signal_process
from pytest_startup_guard.runtime.run_marker import group_carries

# How long ``poll`` waits for the template's report of a member it sees gone (it comes within
# milliseconds: the template's loop wakes on SIGCHLD).
REPORT_WAIT = 2.0


class ForkedProcess:
    """One member forked by a template (``fleet/warm/templates.py``); ``ended`` is told by the template."""

    def __init__(self, pid: int, template_marker: str) -> None:
        self.pid = pid
        facts = proc_stat(pid)
        self.started = facts.started if facts is not None else 0
        self.template_marker = template_marker
        self.returncode: int | None = None
        self._ended = threading.Event()

    def ended(self, code: int) -> None:
        """The template reaped it: it exited with ``code`` (negative: killed by that signal)."""
        self.returncode = code
        self._ended.set()

    def alive(self) -> bool:
        """Not reported ended, and its pid is still the process that was forked."""
        return not self._ended.is_set() and running(self.pid, self.started)

    def poll(self) -> int | None:
        """Its exit code once the template reported it; a member seen gone waits for it."""
        if self.returncode is None and not self._ended.is_set() and not self.alive():
            self._ended.wait(REPORT_WAIT)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                import subprocess

                raise subprocess.TimeoutExpired(f"forked member {self.pid}", timeout or 0.0)
            self._ended.wait(0.05 if remaining is None else min(0.05, remaining))
        return self.returncode

    def send_signal(self, number: int) -> None:
        if not self._ended.is_set():
            signal_process(self.pid, self.started, number)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def target(self) -> Verified:
        """The member for ``end_trees``: signalled only while its pid is the forked process."""
        return _ForkedTarget(self)

    def group(self, marker: str) -> Group:
        """The process group it leads (it called ``setsid``), proven before each signal."""

        def proof() -> bool:
            return (
                self.alive()
                or group_carries(self.pid, marker)
                or group_carries(self.pid, self.template_marker)
            )

        return Group(self.pid, proof)


class _ForkedTarget(Verified):
    def __init__(self, process: ForkedProcess) -> None:
        super().__init__(process.pid, process.started)
        self.process = process

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def ended(self) -> bool:
        return not self.process.alive()


__all__ = ["ForkedProcess"]
