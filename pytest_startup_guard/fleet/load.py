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
from pathlib import Path

from pytest_startup_guard.checks import seconds, whole_number
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.runtime.process_group import end_group

_SPINNER = Path(__file__).parent / "programs" / "spinner.py"  # run by path


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
    where = "cpu_load()"
    whole_number("processes", processes, where)
    seconds("limit", limit, where, positive=True)
    whole_number("memory", memory, where, meaning="bytes kept resident, shared out")
    pinned = ",".join(str(cpu) for cpu in _checked_cpus(cpus, where))
    each = memory // processes if processes else 0
    spinners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(processes):
            spinners.append(
                subprocess.Popen(
                    [sys.executable, str(_SPINNER), str(limit), str(each), pinned],
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


def _checked_cpus(cpus: object, where: str) -> list[int]:
    """``cpus`` as a sorted list of CPUs this process may run on (empty: not pinned). A CPU it
    may not run on would make each spinner die at start, and the load would silently be none."""
    if cpus is None:
        return []
    if isinstance(cpus, (str, bytes)) or not isinstance(cpus, Collection):
        raise ArgumentTypeError(
            f"invalid cpus={cpus!r} for {where}: expected a collection of CPU numbers, such as {{0}}"
        )
    if not hasattr(os, "sched_getaffinity"):
        raise InvalidArgumentError(
            f"invalid cpus={cpus!r} for {where}: this platform cannot pin a process to CPUs;"
            " leave cpus= out"
        )
    allowed = sorted(os.sched_getaffinity(0))
    checked = []
    for cpu in sorted(cpus, key=repr):
        whole_number("cpus", cpu, where)
        if cpu not in allowed:
            raise InvalidArgumentError(
                f"invalid cpus={sorted(cpus, key=repr)!r} for {where}: CPU {cpu} is not one this"
                f" process may run on ({', '.join(map(str, allowed))})"
            )
        checked.append(cpu)
    return sorted(checked)
