"""``cpu_load``: CPU-bound processes beside a test, bounded in time, always cleaned up.

A verdict must not depend on how busy the machine is; the way to show it is to make the machine
busy on purpose. ``with cpu_load(4):`` starts four processes that spin on a CPU (``cpus=`` pins
them, to load one CPU only) and ends them when the block ends. Each one also ends by itself
after ``limit`` seconds, so a load never outlives the run that started it, even one killed
with SIGKILL. ``memory`` (bytes, shared out among them) is kept resident: memory pressure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Collection, Iterator
from contextlib import contextmanager

from pytest_startup_guard.checks import seconds, whole_number
from pytest_startup_guard.runtime.process_group import end_group

_SPINNER = """
import os, sys, time
cpus = [int(cpu) for cpu in sys.argv[3].split(",") if cpu]
if cpus:
    os.sched_setaffinity(0, cpus)
end = time.monotonic() + float(sys.argv[1])
ballast = bytearray(int(sys.argv[2]))
touched = 0.0
x = 0
while True:
    for _ in range(20000):
        x = (x * 31 + 7) % 1000003
    now = time.monotonic()
    if now >= end:
        break
    if ballast and now - touched >= 1.0:
        ballast[::4096] = b"\\1" * len(ballast[::4096])
        touched = now
"""


@contextmanager
def cpu_load(
    processes: int,
    *,
    cpus: Collection[int] | None = None,
    limit: float = 600.0,
    memory: int = 0,
) -> Iterator[list[int]]:
    """Run ``processes`` CPU-bound processes for the block (each ends by itself after ``limit``
    seconds); yields their pids. ``cpus`` pins them to those CPUs."""
    whole_number("processes", processes, "cpu_load()")
    seconds("limit", limit, "cpu_load()", positive=True)
    pinned = ",".join(str(cpu) for cpu in sorted(cpus)) if cpus else ""
    each = memory // processes if processes else 0
    spinners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(processes):
            spinners.append(
                subprocess.Popen(
                    [sys.executable, "-c", _SPINNER, str(limit), str(each), pinned],
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # not in the test's process group: ended here only
                    env={k: v for k, v in os.environ.items() if not k.startswith("STARTUP_GUARD_")},
                )
            )
        yield [spinner.pid for spinner in spinners]
    finally:
        for spinner in spinners:
            end_group(spinner)  # SIGKILL, at once: a spinner has nothing to finish
        for spinner in spinners:
            spinner.wait()
