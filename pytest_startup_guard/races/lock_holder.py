"""The live holder of ``lock_held`` on a path: a process that holds one lock until told to stop.

Started by ``held_locks.LockHolder`` as ``python -m pytest_startup_guard.races.lock_holder
KIND PATH``, outside the plan (its own operations are not accesses of the code under test), with
the run's marker in its environment (``runtime/run_marker.py``): if pytest dies, the reaper ends
it with the rest of the run. It takes the lock the way the real holders do:

- ``flock``: ``fcntl.flock(fd, LOCK_EX)`` on the file opened read-write (filelock's
  ``UnixFileLock``, huggingface_hub's download lock); the file stays when it is released, as
  ``UnixFileLock`` leaves it, so that waiters keep sharing its inode;
- ``lockf``: ``fcntl.lockf(fd, LOCK_EX)``, a POSIX record lock on the whole file;
- ``soft``: filelock's ``SoftFileLock``, the installed release's: the lock file exists, with the
  owner record that release writes (filelock 4: this live process's pid, host and start time),
  and goes when it is released.

It says ``held`` on stdout once it holds the lock, or ``waiting`` when another process holds it
(then it keeps trying, every ``RETRY_SECONDS``, and holds it as soon as it is free: the window
is open either way, since the lock is held). It releases the lock and exits when a byte or EOF
arrives on stdin (the test side stops it, or is gone), or on SIGTERM.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from collections.abc import Callable

RETRY_SECONDS = 0.002  # how often a holder that found the lock taken tries again
KINDS = ("flock", "lockf", "soft")

Release = Callable[[], None]


def _kernel_lock(path: str, kind: str) -> Release | None:
    """``flock`` or ``lockf`` taken without blocking: how to release it, or None if busy."""
    import fcntl

    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    take = fcntl.flock if kind == "flock" else fcntl.lockf
    try:
        take(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError for flock; EACCES or EAGAIN for lockf
        os.close(descriptor)
        return None

    def release() -> None:
        try:
            take(descriptor, fcntl.LOCK_UN)
        finally:
            os.close(descriptor)

    return release


def _soft_lock(path: str) -> Release | None:
    """filelock's ``SoftFileLock`` taken without waiting: how to release it, or None if busy."""
    from filelock import SoftFileLock, Timeout

    lock = SoftFileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return None
    return lock.release


def take(path: str, kind: str) -> Release | None:
    """Try once to take the lock of ``kind`` on ``path``."""
    return _soft_lock(path) if kind == "soft" else _kernel_lock(path, kind)


def _stop_requested(timeout: float | None) -> bool:
    readable, _, _ = select.select([sys.stdin.buffer], [], [], timeout)
    return bool(readable)  # a byte (stop) or EOF (the test side is gone): both mean stop


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in KINDS:
        sys.stderr.write(f"usage: lock_holder {{{'|'.join(KINDS)}}} PATH\n")
        return 2
    kind, path = argv[1], argv[2]
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(0))  # released on the way out
    release = take(path, kind)
    sys.stdout.write("held\n" if release is not None else "waiting\n")
    sys.stdout.flush()
    try:
        while not _stop_requested(None if release is not None else RETRY_SECONDS):
            if release is None:
                release = take(path, kind)
    finally:
        if release is not None:
            release()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
