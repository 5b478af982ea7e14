"""Stale locks: the lock file a process that died holding it leaves behind.

Lock files that a kernel lock backs (``fcntl.flock``, filelock's ``UnixFileLock``) are freed
when their holder dies. Lock files whose *existence* is the lock are not: nobody removes them,
and a start-up that waits for them to go waits forever. Real code uses two kinds:

- ``stale_lock``: an ``O_CREAT | O_EXCL`` file that ``release`` removes, as torch's
  ``FileBaton`` (the ``lock`` file in a ``torch.utils.cpp_extension`` build folder, which every
  later build of that extension waits on in ``FileBaton.wait()``, with no time-out);
- ``stale_soft_lock``: filelock's ``SoftFileLock`` (the fallback where ``fcntl`` is missing or
  the file system has no ``flock``), left by a real process that acquired it and was killed:
  the installed filelock writes whatever it writes into it. Releases that record the owner
  (filelock 4 does: pid, host, start time) break a lock whose owner is gone; a lock file
  without an owner record is waited on until the time-out.

The default trigger puts the lock in place when it is armed and leaves it until teardown: the
fault is persistent, as in production. The verdict that matters (``startup_races(stale=...)``):
a start-up that meets it must recover, or fail closed naming the lock, within the readiness
time-out; waiting forever is failing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.races.base import PathRace, PathTarget, Race
from pytest_startup_guard.runtime.protocol import PLAN_ENV

# A process that takes the soft lock and is killed holding it, as a crashed holder would be.
_DIE_HOLDING = Path(__file__).parent / "programs" / "die_holding_lock.py"  # run by path


class StaleLock(PathRace):
    """An ``O_EXCL``-created lock file whose holder died: torch ``FileBaton`` (the
    ``cpp_extension`` build folder's ``lock``), or any ``os.open(path, O_CREAT | O_EXCL)``
    lock released by removing the file. Empty, as ``FileBaton`` leaves it."""

    name = "stale_lock"
    found = "{what} left by a process that died holding it"
    models = (
        "a lock file created with O_CREAT | O_EXCL by a process that died holding it (torch"
        " FileBaton, the cpp_extension build folder's lock): nobody removes it"
    )
    stale = True

    @Race.takes(PathTarget)
    def is_hit(self, target: PathTarget, path: str) -> bool:
        return os.path.abspath(path) == str(target.path)

    @Race.takes(PathTarget)
    def check(self, target: PathTarget) -> None:
        self._free(target)

    def _free(self, target: PathTarget) -> None:
        if os.path.lexists(target.path):
            raise StartupGuardError(
                f"race {self.name!r}: a file is already at {target.path}; a stale lock goes where"
                " no lock is (remove it, or arm the race on the lock's own path)"
            )
        target.path.parent.mkdir(parents=True, exist_ok=True)

    @Race.takes(PathTarget)
    def open(self, target: PathTarget) -> None:
        self._free(target)
        descriptor = os.open(target.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(descriptor)  # its holder is gone: the kernel closed what it had open
        target.state.placed = True

    @Race.takes(PathTarget)
    def close(self, target: PathTarget) -> None:
        placed, target.state.placed = target.state.placed, False
        if placed:
            try:
                os.remove(target.path)  # whoever broke it may have removed it already
            except FileNotFoundError:
                pass


class StaleSoftLock(StaleLock):
    """filelock's ``SoftFileLock`` left by a real process killed while holding it; filelock
    releases that write an owner record break it, those that do not wait for it."""

    name = "stale_soft_lock"
    models = (
        "filelock's SoftFileLock left by a process killed while holding it (the fallback where"
        " fcntl or flock is missing): releases with an owner record break it, others wait"
    )

    @Race.takes(PathTarget)
    def open(self, target: PathTarget) -> None:
        self._free(target)
        env = {key: value for key, value in os.environ.items() if key != PLAN_ENV}  # not under test
        done = subprocess.run(
            [sys.executable, str(_DIE_HOLDING), str(target.path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != -signal.SIGKILL or not os.path.lexists(target.path):
            why = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
            raise StartupGuardError(
                f"race {self.name!r} could not leave a soft lock at {target.path}: {why[0]}"
                " (it needs the filelock package in the interpreter the tests run under)"
            )
        target.state.placed = True
        target.state.siblings = _siblings(target.path)

    @Race.takes(PathTarget)
    def close(self, target: PathTarget) -> None:
        siblings, target.state.siblings = target.state.siblings, []
        for extra in siblings:  # files filelock keeps beside the lock
            try:
                os.remove(extra)
            except FileNotFoundError:
                pass
        super().close(target)


def _siblings(lock: Path) -> list[Path]:
    """Files next to ``lock`` that share its name (``x.lock.marker`` and such)."""
    return [path for path in lock.parent.glob(f"{lock.name}.*") if path.is_file()]


STALE_LOCKS: tuple[type[Race], ...] = (StaleLock, StaleSoftLock)
