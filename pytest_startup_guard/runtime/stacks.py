"""The Python stacks of a live process under the plan, asked for by signal.

A process that said hello registered a stack dump of all its threads on ``DUMP_SIGNAL`` into a
file of its own in the plan's folder (``child/join.py``). ``stacks_of(record)`` signals it,
only while its pid is still the process that said hello (its start time), waits until the file
stops growing, and reads what was added.

The test side only: standard library at import.
"""

from __future__ import annotations

import time
from pathlib import Path

from pytest_startup_guard.runtime.child.state import DUMP_SIGNAL
from pytest_startup_guard.runtime.events import ProcessRecord
from pytest_startup_guard.runtime.process_identity import signal_process


def stacks_of(record: ProcessRecord, timeout: float = 3.0) -> str | None:
    """Every thread's stack of ``record``'s process, or None: no dump registered, the pid names
    another process by now, or nothing was written within ``timeout`` seconds."""
    if record.dump_path is None:
        return None
    path = Path(record.dump_path)
    before = path.stat().st_size if path.exists() else 0
    # Only the process that said hello: a pid reused since then is left alone.
    if not signal_process(record.pid, record.started, DUMP_SIGNAL):
        return None
    deadline = time.monotonic() + timeout
    last_size = -1
    while time.monotonic() < deadline:
        size = path.stat().st_size if path.exists() else 0
        if size > before and size == last_size:
            break  # written, and no longer growing
        last_size = size
        time.sleep(0.02)
    try:
        with open(path, errors="replace") as dump:
            dump.seek(before)
            text = dump.read()
    except OSError:
        return None
    return text or None


__all__ = ["stacks_of"]
