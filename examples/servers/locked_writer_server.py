"""A small real API server that downloads its model file under a lock at start-up.

    python locked_writer_server.py --folder DIR --port 8000 [--lock flock|lockf]
        [--policy naive|safe] [--on-held wait|timeout] [--lock-timeout SECONDS]

Several servers starting together share one folder: each takes ``DIR/download.lock``
(``--lock flock``: filelock's ``FileLock``, as huggingface_hub does; ``--lock lockf``: a POSIX
``fcntl.lockf`` record lock) and, if ``DIR/model.bin`` is not there yet, "downloads" it in
chunks, then releases the lock and checks the file: it must be exactly what was downloaded, or
the server exits naming it. ``GET /health`` answers once the file is checked. What it does:

- ``--policy naive``: downloads into ``model.bin.incomplete`` opened in append mode, then
  renames it into place, as huggingface_hub did before huggingface/huggingface_hub#4306: where
  the lock does not exclude (Lustre, GPFS, some NFS mounts), two servers append into the same
  file and the model is corrupt (or the second rename finds nothing to move);
- ``--policy safe``: downloads into a file of its own (``model.bin.<random>.incomplete``) and
  moves it into place with ``os.replace``, as the fix does: whoever moves last moves a whole
  file, so a lock that does not exclude costs a second download, never a corrupt model;
- ``--on-held wait``: waits for a held lock as long as it takes (``FileLock().acquire()`` with
  no time-out, huggingface/datasets#329: it never returns if the holder never lets go);
- ``--on-held timeout``: waits up to ``--lock-timeout`` seconds, then exits naming the lock
  (fails closed).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from config_server import serve

CHUNKS = 8
CHUNK = 4096
CHUNK_PAUSE = 0.04  # seconds between two chunks: a download takes a while
CONTENT = b"".join(bytes([ord("A") + index]) * CHUNK for index in range(CHUNKS))
POLL = 0.05


def fail(message: str) -> None:
    raise SystemExit(f"server failed to start: {message}")


def take_lock(lock: Path, kind: str, on_held: str, lock_timeout: float) -> Callable[[], None]:
    """Take the download lock; how to release it."""
    timeout = lock_timeout if on_held == "timeout" else -1
    if kind == "flock":
        from filelock import FileLock, Timeout

        held = FileLock(str(lock))
        try:
            held.acquire(timeout=timeout, poll_interval=POLL)
        except Timeout:
            fail(f"the download lock {lock} is still held by another process after {timeout:g} s")
        return held.release
    descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    started = time.monotonic()
    while True:
        try:
            fcntl.lockf(descriptor, fcntl.LOCK_EX | (fcntl.LOCK_NB if timeout >= 0 else 0))
            break
        except OSError:
            if time.monotonic() - started >= timeout:
                os.close(descriptor)
                fail(
                    f"the download lock {lock} is still held by another process after {timeout:g} s"
                )
            time.sleep(POLL)

    def release() -> None:
        fcntl.lockf(descriptor, fcntl.LOCK_UN)
        os.close(descriptor)

    return release


def download(target: Path, policy: str) -> None:
    """Write ``CONTENT`` chunk by chunk into a temporary name, then move it into place."""
    if policy == "naive":
        partial = target.with_name(f"{target.name}.incomplete")
        mode = "ab"  # resumes what is there, as huggingface_hub did
    else:
        partial = target.with_name(f"{target.name}.{os.urandom(8).hex()}.incomplete")
        mode = "wb"
    with open(partial, mode) as handle:
        for index in range(CHUNKS):
            handle.write(CONTENT[index * CHUNK : (index + 1) * CHUNK])
            handle.flush()
            time.sleep(CHUNK_PAUSE)
    try:
        os.replace(partial, target)
    except FileNotFoundError:
        fail(
            f"{partial} was gone before it could be moved to {target} (moved by another download?)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lock", choices=("flock", "lockf"), default="flock")
    parser.add_argument("--policy", choices=("naive", "safe"), default="safe")
    parser.add_argument("--on-held", choices=("wait", "timeout"), default="wait")
    parser.add_argument("--lock-timeout", type=float, default=2.0)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    target = args.folder / "model.bin"
    release = take_lock(args.folder / "download.lock", args.lock, args.on_held, args.lock_timeout)
    try:
        if not target.exists():
            download(target, args.policy)
    finally:
        release()
    size = target.stat().st_size
    if target.read_bytes() != CONTENT:
        fail(
            f"{target} is corrupt: {size} bytes, expected {len(CONTENT)} (two downloads wrote it?)"
        )
    serve({"model_type": "locked-writer", "bytes": size}, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
