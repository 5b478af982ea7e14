"""A small real API server that builds an extension under a build lock at start-up.

    python lock_server.py --build DIR --port 8000 [--style baton|soft] [--on-stale POLICY]

Several servers starting together build (or load) the same extension in one build folder, and
take a lock so only one builds: torch's ``cpp_extension`` takes ``DIR/lock`` with
``FileBaton``; other code takes a filelock ``SoftFileLock``. The one that gets the lock builds
``DIR/extension.json`` and removes the lock; the others wait for the lock to go, then load.
``GET /health`` answers once the extension is loaded. If a process died holding the lock, the
lock stays. What the server does then is the policy:

- ``--style baton --on-stale wait``: ``FileBaton.wait()``: spins while the lock file exists,
  with no time-out: it waits forever;
- ``--style baton --on-stale fail``: waits up to ``--lock-timeout`` seconds, then exits naming
  the lock and how to clear it (fails closed);
- ``--style baton --on-stale break``: a lock file older than ``--lock-timeout`` seconds whose
  build never finished is taken as stale: removed and taken again (recovers);
- ``--style soft``: filelock's ``SoftFileLock(...).acquire()``: what happens is what the
  installed filelock does (releases that record the owner break a lock whose owner is dead).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from config_server import serve

POLL = 0.1


def build(folder: Path) -> None:
    """The extension build the lock protects: written to a temporary name, then moved."""
    partial = folder / f"extension.json.{os.getpid()}.tmp"
    partial.write_text(json.dumps({"kernel": "fused_rmsnorm", "built_by": os.getpid()}))
    os.replace(partial, folder / "extension.json")


def baton(folder: Path, on_stale: str, lock_timeout: float) -> None:
    lock = folder / "lock"
    started = time.monotonic()
    while True:
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL)  # FileBaton.try_acquire
        except FileExistsError:
            pass
        else:
            try:
                if not (folder / "extension.json").exists():
                    build(folder)
            finally:
                os.close(descriptor)
                try:
                    os.remove(lock)  # FileBaton.release
                except FileNotFoundError:
                    pass  # another server broke it as stale meanwhile
            return
        if (folder / "extension.json").exists():
            return  # another process built it while we waited (FileBaton.wait, then load)
        waited = time.monotonic() - started
        if on_stale == "fail" and waited >= lock_timeout:
            raise SystemExit(
                f"server failed to start: the build lock {lock} has been held for {waited:.1f} s"
                " and the extension was never built; a process that died while building leaves"
                f" it: remove {lock} and start again"
            )
        if on_stale == "break" and waited >= lock_timeout:
            print(f"breaking the stale build lock {lock} (held {waited:.1f} s)", flush=True)
            try:
                os.remove(lock)
            except FileNotFoundError:
                pass
            started = time.monotonic()
            continue
        time.sleep(POLL)  # on_stale == "wait": FileBaton.wait() spins until the file is gone


def soft(folder: Path, lock_timeout: float) -> None:
    from filelock import SoftFileLock

    with SoftFileLock(str(folder / "lock")).acquire(timeout=-1, poll_interval=POLL):
        if not (folder / "extension.json").exists():
            build(folder)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--build", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--style", choices=("baton", "soft"), default="baton")
    parser.add_argument("--on-stale", choices=("wait", "fail", "break"), default="wait")
    parser.add_argument("--lock-timeout", type=float, default=2.0)
    args = parser.parse_args()
    args.build.mkdir(parents=True, exist_ok=True)
    if args.style == "soft":
        soft(args.build, args.lock_timeout)
    else:
        baton(args.build, args.on_stale, args.lock_timeout)
    extension = json.loads((args.build / "extension.json").read_text())
    serve({"model_type": f"extension {extension['kernel']}", **extension}, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
