"""A process's own time: the wall time it had, less the time it spent waiting for a CPU.

On a quiet machine the two are the same. On a busy one (a shared CI runner, ``pytest -n auto``
beside other jobs) a runnable process waits in the scheduler's run queue, and a deadline in wall
time turns into a race between the server and the load. Linux counts that wait per thread, in
nanoseconds, in the second field of ``/proc/<pid>/schedstat`` (the main thread's: where a server
starts up). Deadlines and holds counted in own time mean on a loaded machine what they mean on a
quiet one: "not ready after 8 s" is 8 s in which the server could have run.

Where the count cannot be read (another OS, a process already reaped), the wait is taken as
what was last read, so own time falls back to wall time: never shorter than on a quiet machine.
"""

from __future__ import annotations

import time

# A decision that needs more than this many times the time allowed, in wall time, is not
# taken: the machine was too slow to decide (a verdict says so instead of guessing).
MAX_STRETCH = 4.0
# A race window held for a process in its own time ends after at most this many times its hold
# in wall time. Larger than MAX_STRETCH: a window the cap ends before the process had its hold is
# cut short, and its hits prove nothing (a case says undecided), so the cap should be reached
# only on a machine far busier than a CI runner; the windows hold for milliseconds, so a
# starved process keeps one open for a fraction of a second at most.
HOLD_MAX_STRETCH = 25.0


def cpu_wait(pid: int) -> float | None:
    """Seconds the main thread of ``pid`` has waited for a CPU since it started, if known."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as handle:
            fields = handle.read().split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class OwnClock:
    """Own time of one process from now on: ``own()`` = wall time since the start, less the
    time its main thread has waited for a CPU since then."""

    __slots__ = ("_wait_at_start", "_waited", "pid", "started")

    def __init__(self, pid: int, started: float | None = None) -> None:
        self.pid = pid
        self.started = time.monotonic() if started is None else started
        self._wait_at_start = cpu_wait(pid)
        self._waited = 0.0

    def waited(self) -> float:
        """Seconds spent waiting for a CPU since the start (the last value read, if gone)."""
        if self._wait_at_start is not None:
            now = cpu_wait(self.pid)
            if now is not None:
                self._waited = max(self._waited, now - self._wait_at_start)
        return self._waited

    def own(self, now: float | None = None) -> float:
        """Seconds of own time since the start."""
        wall = (time.monotonic() if now is None else now) - self.started
        return max(0.0, wall - self.waited())

    def describe(self, now: float | None = None) -> str:
        """'8.0 s of its own time (11.2 s wall, 3.2 s waiting for a CPU)'."""
        wall = (time.monotonic() if now is None else now) - self.started
        waited = self.waited()
        own = max(0.0, wall - waited)
        if waited < 0.05:
            return f"{wall:.1f} s"
        return f"{own:.1f} s of its own time ({wall:.1f} s wall, {waited:.1f} s waiting for a CPU)"
