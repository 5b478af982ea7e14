"""A small real API server that publishes a compiled kernel into a shared cache at start-up, as
Triton's cache does, on a folder that may be a network file system.

    python shared_fs_server.py --cache DIR --port 8000 [--policy naive|retry]
                               [--index I --rotate-by K]

At start-up, under ``DIR`` (every member of a fleet shares it):

1. take ``fcntl.flock`` on ``DIR/kernels.lock`` (filelock's and huggingface_hub's lock);
2. on a miss, compile the kernel and publish it: write ``DIR/kernels/matmul.json.tmp.<pid>``,
   then ``os.replace`` it onto ``DIR/kernels/matmul.json`` (Triton's ``FileCacheManager.put``);
3. release the lock, load the entry, serve ``GET /health``.

With ``--rotate-by K``, member ``K`` (its ``--index``) is a cleaner: once the other member
says it loaded the entry (``DIR/loaded.<index>``), it moves ``DIR/kernels`` aside, publishes a
fresh entry and says so (``DIR/rotated``); every other member loads the entry a second time
after that (a warm-up re-read). On one local disk that is harmless; on a network file system
the reader's handle names a folder that is gone (``ESTALE``, hiyouga/LlamaFactory#3388).

What the server does when a file-system call fails is the policy:

- ``naive``: nothing: it dies on the first ``OSError`` (``ESTALE`` on the rename of
  pytorch/pytorch#173679, ``ENOSYS`` from ``flock`` of huggingface/huggingface_hub#2399);
- ``retry``: retries each step a few times (a stale handle or a busy file is transient on a
  network file system), and goes on without the lock where the file system has none
  (``ENOSYS``, ``ENOLCK``, ``EBADF``: the fix of huggingface_hub#2399).
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from config_server import serve, with_retry

KERNEL = {"kernel": "matmul", "blocks": list(range(64))}
NO_LOCKS = (errno.ENOSYS, errno.ENOLCK, errno.EBADF, errno.EOPNOTSUPP)
HANDSHAKE_TIMEOUT = 10.0  # seconds a member waits for the other's step (never in a passing run)
T = TypeVar("T")


def publish(kernels: Path) -> None:
    """Compile (here: write) the entry and move it into place atomically, as Triton does."""
    kernels.mkdir(parents=True, exist_ok=True)
    temporary = kernels / f"matmul.json.tmp.{os.getpid()}"
    temporary.write_text(json.dumps(KERNEL))
    os.replace(temporary, kernels / "matmul.json")


def load(kernels: Path) -> dict[str, Any]:
    with open(kernels / "matmul.json") as handle:
        entry: dict[str, Any] = json.load(handle)
    return entry


def locked(cache: Path, policy: str, step: Callable[[], T]) -> T:
    """Run ``step`` under the cache's flock; without it where the file system has no locks
    (``retry`` only)."""
    with open(cache / "kernels.lock", "a+") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        except OSError as error:
            if policy == "naive" or error.errno not in NO_LOCKS:
                raise
            print(f"no locks on this file system ({error}): going on without", flush=True)
            return step()
        try:
            return step()
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + HANDSHAKE_TIMEOUT
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)


def start(args: argparse.Namespace) -> dict[str, Any]:
    cache: Path = args.cache
    kernels = cache / "kernels"

    def step(what: str, func: Callable[[], T]) -> T:
        return func() if args.policy == "naive" else with_retry(func, what, retry_delay=0.05)

    def publish_on_a_miss() -> None:
        if not os.path.exists(kernels / "matmul.json"):
            step("publishing the kernel", lambda: publish(kernels))

    locked(cache, args.policy, publish_on_a_miss)
    entry = step("loading the kernel", lambda: load(kernels))
    if args.rotate_by is None:
        return entry
    if args.index == args.rotate_by:
        for index in range(args.count):
            if index != args.index:
                wait_for(cache / f"loaded.{index}")
        os.rename(kernels, cache / f"kernels.old.{os.getpid()}")
        locked(cache, args.policy, lambda: step("publishing the kernel", lambda: publish(kernels)))
        (cache / "rotated").write_text("done")
        return step("loading the kernel", lambda: load(kernels))
    (cache / f"loaded.{args.index}").write_text("done")
    wait_for(cache / "rotated")
    return step("loading the kernel again", lambda: load(kernels))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--policy", choices=("naive", "retry"), default="naive")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--count", type=int, default=2)
    parser.add_argument("--rotate-by", type=int, default=None)
    args = parser.parse_args()
    try:
        entry = start(args)
    except Exception:
        traceback.print_exc()
        print(
            f"server failed to start: could not publish or load the kernel in {args.cache}",
            file=sys.stderr,
        )
        return 1
    serve({"model_type": f"kernel {entry['kernel']}", **entry}, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
