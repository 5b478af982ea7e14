"""Locks held by a live process: ``lock_held`` on a hub repo's download lock or on any path, and
``lock_held_for_good``, the same lock never released.

A start-up that takes a lock another live process holds waits, or gives up, or goes on without
it: which one is what the test is about. The holder takes the lock the way the real holders do
(``LockHeld(kind=...)``):

- ``"flock"`` (the default): ``fcntl.flock``, what filelock's ``FileLock`` (``UnixFileLock``)
  and so huggingface_hub's download lock take;
- ``"lockf"``: ``fcntl.lockf``, a POSIX record lock (code that locks with ``lockf`` or
  ``fcntl(F_SETLKW)``);
- ``"soft"``: filelock's ``SoftFileLock``: the lock file exists, with the owner record the
  installed filelock writes (filelock 4: pid, host, start time) of a holder that is alive, so
  releases that break a dead owner's lock wait for this one.

On a hub repo's file, ``lock_held`` with the default kind holds the blob's
``.locks/<repo>/<etag>.lock`` with ``FileLock`` in the test process, as it always has. Everywhere
else (a path under the test's ``shared_dir``, ``hub_cache`` or ``tmp_path``, another kind, or
the lock held for good) the holder is a process of its own (``lock_holder.py``), started when a
window opens and stopped when it closes: a ``lockf`` lock or a soft lock's owner must be another
process than the code under test, which may run in the test process. It carries the run's marker
(``runtime/run_marker.py``), so that it ends with the run even if pytest dies, and it stops when
its stdin closes: it never outlives the test.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path
from typing import IO, Literal

from pytest_startup_guard.errors import InvalidArgumentError, StartupGuardError
from pytest_startup_guard.races.base import PathTarget, Race, RaceTarget, Target, path_forms
from pytest_startup_guard.runtime.observation import unobserved
from pytest_startup_guard.runtime.protocol import PLAN_ENV, RUN_ENV
from pytest_startup_guard.runtime.run_marker import new_tree

LockKind = Literal["flock", "lockf", "soft"]
LOCK_KINDS: tuple[LockKind, ...] = ("flock", "lockf", "soft")
READY_SECONDS = 30.0  # how long a holder process may take to start and try the lock
STOP_SECONDS = 10.0  # how long a holder process may take to release the lock and exit


def lock_kind(value: object, where: str) -> LockKind:
    """``value`` if it is one of ``LOCK_KINDS``; otherwise an error naming it and the kinds."""
    for kind in LOCK_KINDS:
        if value == kind and isinstance(value, str):
            return kind
    raise InvalidArgumentError(
        f"invalid kind={value!r} for {where}: expected 'flock' (fcntl.flock, filelock's FileLock),"
        " 'lockf' (fcntl.lockf, a POSIX record lock) or 'soft' (filelock's SoftFileLock)"
    )


class LockHolder:
    """One live holder process of one lock, from ``start`` until ``stop``."""

    def __init__(self, kind: LockKind, path: Path, label: str) -> None:
        """Start the holder and wait until it holds the lock (or found it held by another
        process, and keeps trying); ``label`` names the race in errors."""
        env = {key: value for key, value in os.environ.items() if key != PLAN_ENV}  # not under test
        env[RUN_ENV] = new_tree()  # the reaper ends it with the run should pytest die
        self.path = path
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest_startup_guard.races.lock_holder", kind, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin: IO[bytes] = self.process.stdin
        self.state = self._first_line(self.process.stdout, label)

    def _first_line(self, stdout: IO[bytes], label: str) -> str:
        """``held`` or ``waiting``: what the holder says once it tried the lock."""
        readable, _, _ = select.select([stdout], [], [], READY_SECONDS)
        line = stdout.readline().decode(errors="replace").strip() if readable else ""
        if line in ("held", "waiting"):
            return line
        self.stop()
        stderr = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
        why = stderr.strip().splitlines()[-1:] or [
            f"it said nothing within {READY_SECONDS:g} s"
            if not readable
            else f"exit code {self.process.returncode}"
        ]
        raise StartupGuardError(
            f"race {label} could not start the process that holds {self.path}: {why[0]}"
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> bool:
        """Have the holder release the lock and exit, and wait for it (killed after
        ``STOP_SECONDS``); whether it released the lock itself. Idempotent."""
        if self.process.returncode is not None:
            return self.process.returncode == 0
        try:
            self._stdin.close()  # EOF: release and exit
        except OSError:
            pass
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode == 0


class LockHeld(Race):
    """Another process holds the lock. On a hub repo's file: the blob's
    ``.locks/<repo>/<etag>.lock``, held with ``filelock`` as huggingface_hub does while it
    downloads that blob: closed up to 0.18.0 (it locked ``blobs/<etag>.lock``); open from
    0.19.0 (``FileLock``, ``WeakFileLock`` from 0.22.0; docs/hub-versions.md). Readers of the
    cache take no lock, so only code that takes this lock can hit it (a download, a writer):
    this race is not part of ``transient="all"``.

    On any path (``hub_race.arm_path("lock_held", path)``, ``startup_case.apply(path)``): the
    lock file at ``path``, held by a live process of the plugin's with ``kind``'s lock: a build,
    compile or download lock that another process holds while it works."""

    name = "lock_held"
    found = "{what} held by another process"
    # A whole download: huggingface_hub holds the lock across the HTTP request(s) of the blob,
    # which no offline benchmark can time (its local part, WeakFileLock taken, blob written
    # and moved: median 0.32 ms; benchmarks/bench_windows.py). 0.5 s, a small file's HEAD and
    # GET from the Hub, kept from before; code that takes the lock waits for it, never retries.
    window = 0.5
    models = (
        "huggingface_hub's download lock held on .locks/<repo>/<etag>.lock:"
        " closed up to 0.18.0; open from 0.19.0 (WeakFileLock from 0.22.0);"
        " on any path, a lock file another live process holds (flock, lockf or filelock's"
        " SoftFileLock)"
    )
    in_all = False
    on_paths = True  # any path too; on a hub repo's file it races that file's download lock

    def __init__(self, kind: LockKind = "flock") -> None:
        self.kind = lock_kind(kind, f"{type(self).__name__}()")

    def __repr__(self) -> str:
        shown = "" if self.kind == "flock" else f"kind={self.kind!r}"
        return f"{type(self).__name__}({shown})"

    def looks_meet(self) -> bool:
        """A held flock or lockf is invisible to a stat; a soft lock is a file that exists only
        while it is held, which a stat finds."""
        return self.kind == "soft"

    def lock_of(self, target: Target) -> Path:
        """The lock file: a hub file's download lock, else the path itself."""
        if isinstance(target, RaceTarget):
            return target.lock
        if target.repo is None or target.filename is None or self.stale:
            return target.path  # a stale form on a hub file is given the download lock itself
        lock = target.state.lock_path
        if lock is None:  # found once, in the thread that arms it: never at an access
            lock = RaceTarget.of(target.repo, target.filename, target.revision).lock
            target.state.lock_path = lock
        return lock

    def _in_test_process(self, target: Target) -> bool:
        """The hub race as it always was: ``FileLock`` held by the test process."""
        on_hub = isinstance(target, RaceTarget) or target.repo is not None
        return on_hub and self.kind == "flock" and not self.stale

    def watched(self, target: Target, /) -> tuple[Path, ...]:
        lock = self.lock_of(target)
        repo = target.repo
        return (lock.parent,) if repo is None else (repo.path, lock.parent)

    def is_hit(self, target: Target, /, path: str) -> bool:
        """An access of the lock file itself (its ``open``, or a ``flock``/``lockf`` on it)."""
        return os.path.abspath(path) in path_forms(self.lock_of(target))

    def raced_files(self, target: Target, /) -> tuple[Path, ...]:
        return (self.lock_of(target),)  # only code that takes the lock reads what this races

    def check(self, target: Target, /) -> None:
        if not isinstance(target, PathTarget) or target.repo is not None:
            self.lock_of(target)  # a file the repo lacks: an error now
            return
        lock = target.path
        if lock.is_dir() and not lock.is_symlink():
            raise StartupGuardError(
                f"race {self.name!r} holds a lock file, and {lock} is a folder: name the lock file"
                f" inside it (such as {lock / 'download.lock'})"
            )
        if self.kind == "soft" and os.path.lexists(lock):
            raise StartupGuardError(
                f"race {self.name!r} with kind='soft': a file is already at {lock}, and a soft"
                " lock is a file that exists only while it is held; remove it, or arm the race"
                " on the lock's own path"
            )
        with unobserved():  # the plugin's own folder, not an access of the code under test
            lock.parent.mkdir(parents=True, exist_ok=True)

    def open(self, target: Target, /) -> None:
        lock = self.lock_of(target)
        lock.parent.mkdir(parents=True, exist_ok=True)
        if self._in_test_process(target):
            from filelock import FileLock

            held = FileLock(str(lock))
            held.acquire(timeout=5)
            target.state.held = held
            return
        label = f"{self.name!r} on {target.label}"
        target.state.holder = LockHolder(self.kind, lock, label)

    def close(self, target: Target, /) -> None:
        held, target.state.held = target.state.held, None
        if held is not None:
            held.release()
        holder, target.state.holder = target.state.holder, None
        if holder is not None and not holder.stop() and self.kind == "soft":
            # Killed before it could release: its soft lock would stay as a dead owner's.
            try:
                os.remove(holder.path)
            except FileNotFoundError:
                pass


class LockHeldForGood(LockHeld):
    """A live process holds the lock and never lets it go: a download or build that never ends,
    a holder stuck with the lock (datasets' ``FileLock`` acquire that never returns,
    huggingface/datasets#329). Put in place when it is armed and held until teardown (the
    ``placed()`` trigger, as the stale locks). A start-up that meets it must go on without the
    lock or fail closed naming it within the readiness time-out; waiting forever is failing
    (``startup_races(stale=["lock_held_for_good"])``)."""

    name = "lock_held_for_good"
    models = (
        "a lock file held for good by a live process (flock, lockf or filelock's SoftFileLock):"
        " a download or build that never ends, a FileLock acquire that never returns"
    )
    stale = True


HELD_LOCKS: tuple[type[Race], ...] = (LockHeldForGood,)  # the stale form; LockHeld is a hub race

__all__ = ["HELD_LOCKS", "LOCK_KINDS", "LockHeld", "LockHeldForGood", "LockHolder", "LockKind"]
