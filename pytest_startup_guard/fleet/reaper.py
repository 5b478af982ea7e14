"""The reaper: kills fleet processes when the pytest process dies without its teardown.

pytest-timeout's thread method ends pytest with ``os._exit``; a SIGKILL ends it with nothing
run at all. Fleet members live in sessions of their own, so nothing else would stop them. The
reaper is a small process in its own session, started once per pytest process: pytest writes
``add``/``remove`` lines to its stdin; when that pipe reaches end of file (pytest is gone, by
whatever means), it terminates every registered process tree that is still alive.

Standard library, psutil and ``runtime.process_group`` only, the last two loaded only to end trees.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

    from pytest_startup_guard.runtime.process_group import ByPid

GRACE_SECONDS = 5.0


@dataclass
class _Entry:
    pid: int
    create_time: float
    pgid: int


def _same_process(entry: _Entry) -> bool:
    import psutil

    try:
        return abs(psutil.Process(entry.pid).create_time() - entry.create_time) < 0.05
    except psutil.Error:
        return False


def terminate_trees(entries: list[_Entry], grace: float = GRACE_SECONDS) -> None:
    """SIGTERM every process of the trees (and of their process groups), SIGKILL the rest."""
    # Imported here, like psutil: the reaper starts with every pytest process that launches a
    # fleet, and mostly just reads its stdin; ending trees happens at most once, at its end.
    from pytest_startup_guard.runtime.process_group import ByPid, end_trees

    end_trees(
        [ByPid(process) for process in _victims(entries)],
        # Every entry's group, even where its process is gone: what it started may be left.
        [entry.pgid for entry in entries],
        grace,
        wait=_wait_procs,
        # Nothing runs after the reaper: what left the trees but stayed in a group ends now.
        always_kill_groups=True,
    )


def _victims(entries: list[_Entry]) -> list[psutil.Process]:
    """Every process of the registered trees, as they are now (children came after ``add``)."""
    import psutil

    victims: dict[int, psutil.Process] = {}
    for entry in entries:
        if not _same_process(entry):
            continue
        try:
            root = psutil.Process(entry.pid)
            for process in [root, *root.children(recursive=True)]:
                victims[process.pid] = process
        except psutil.Error:
            pass
    return list(victims.values())


def _wait_procs(victims: Sequence[ByPid], seconds: float) -> list[ByPid]:
    """The victims still running after ``seconds``, as ``psutil.wait_procs`` sees them (unlike
    ``ByPid.ended``, a zombie counts as running until its parent reaps it)."""
    import psutil

    _, alive = psutil.wait_procs([victim.process for victim in victims], timeout=seconds)
    return [victim for victim in victims if victim.process in alive]


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for pytest, which then tears down
    entries: dict[int, _Entry] = {}
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 4 and parts[0] == "add":
            entries[int(parts[1])] = _Entry(int(parts[1]), float(parts[2]), int(parts[3]))
        elif len(parts) == 2 and parts[0] == "remove":
            entries.pop(int(parts[1]), None)
    if entries:  # end of file with live registrations: pytest died without its teardown
        terminate_trees(list(entries.values()))
    return 0


@dataclass
class Reaper:
    """The pytest side: one reaper process per pytest process, started on first use."""

    _process: subprocess.Popen[str] | None = None
    _stdin: IO[str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _start(self) -> IO[str]:
        if self._stdin is None:
            env = {
                key: value
                for key, value in os.environ.items()
                if not key.startswith("STARTUP_GUARD_")
            }
            self._process = subprocess.Popen(
                [sys.executable, "-m", "pytest_startup_guard.fleet.reaper"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                text=True,
            )
            assert self._process.stdin is not None
            self._stdin = self._process.stdin
        return self._stdin

    def add(self, pid: int) -> None:
        self.add_all([pid])

    def add_all(self, pids: list[int]) -> None:
        """Register processes in one write: a fleet's members once all are started (a write
        each would wake the reaper once per member while the fleet is starting)."""
        import psutil

        lines = []
        for pid in pids:
            try:
                create_time = psutil.Process(pid).create_time()
                pgid = os.getpgid(pid)
            except (psutil.Error, OSError):
                continue
            lines.append(f"add {pid} {create_time} {pgid}\n")
        if not lines:
            return
        with self._lock:
            stream = self._start()
            stream.write("".join(lines))
            stream.flush()

    def remove(self, pid: int) -> None:
        with self._lock:
            if self._stdin is not None:
                self._stdin.write(f"remove {pid}\n")
                self._stdin.flush()

    def close(self) -> None:
        """Normal end of the session: every fleet was stopped; let the reaper exit."""
        with self._lock:
            if self._stdin is not None:
                self._stdin.close()
                self._stdin = None
            if self._process is not None:
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                self._process = None


if __name__ == "__main__":
    sys.exit(main())
