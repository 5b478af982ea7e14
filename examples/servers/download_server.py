"""A small real API server that downloads its model from the Hub at start-up, then serves it.

    python download_server.py --model acme/tiny --port 8000 [--policy POLICY] [--rank N]

Many members of one deployment start at once on one shared Hugging Face cache, and the cache is
cold: the model must be downloaded first. It downloads from ``HF_ENDPOINT`` with the real
``huggingface_hub.snapshot_download``, loads the config from the snapshot with
``transformers.AutoConfig``, and serves ``GET /health`` (200 once loaded) and ``GET /config``.
Who downloads is the policy:

- ``every``: every member downloads; huggingface_hub's own lock per blob makes that safe (one
  downloads a file, the others wait on its lock and find it there);
- ``rank0``: rank 0 downloads; the others wait, at most ``--wait-timeout`` seconds, until the
  cache holds the commit whole, then load it offline (``local_files_only=True``); if it never
  comes they fail closed, naming the repo and what they waited for;
- ``naive``: rank 0 downloads; the others read the cache at once, offline, as if rank 0 were
  done: on a warm cache that works, on a cold one they find nothing (``LocalEntryNotFoundError``)
  or a part of the snapshot, and die.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from typing import Any

from config_server import serve  # the same server as the config server

POLL = 0.05  # seconds between two looks at the cache while rank 0 downloads


def download(model: str) -> str:
    from huggingface_hub import snapshot_download

    return snapshot_download(model)


def cached(model: str) -> str:
    """The snapshot of ``model``'s revision from the cache alone; huggingface_hub raises
    ``LocalEntryNotFoundError`` when the ref or the snapshot is not there, and (2.x, which keeps
    the commit's file list beside the cache) ``IncompleteSnapshotError``, a subclass, when a
    file of the commit is still missing."""
    from huggingface_hub import snapshot_download

    return snapshot_download(model, local_files_only=True)


def wait_for_commit(model: str, wait_timeout: float) -> str:
    """Rank 0 is downloading: look until the cache holds the commit whole, within a bound."""
    from huggingface_hub.utils import LocalEntryNotFoundError

    started = time.monotonic()
    while True:
        try:
            return cached(model)
        except LocalEntryNotFoundError as error:
            waited = time.monotonic() - started
            if waited >= wait_timeout:  # fail closed: a rank 0 that died must not hang us
                raise TimeoutError(
                    f"rank 0 did not finish downloading {model} into the cache within"
                    f" {waited:.1f} s (last: {type(error).__name__}: {error})"
                ) from error
        time.sleep(POLL)


def snapshot(model: str, policy: str, rank: int, wait_timeout: float) -> str:
    if policy == "every" or rank == 0:
        return download(model)
    if policy == "rank0":
        return wait_for_commit(model, wait_timeout)
    if policy == "naive":
        return cached(model)  # the bug: nothing says rank 0 is done
    raise ValueError(f"unknown policy {policy!r}")


def load(folder: str) -> dict[str, Any]:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder).to_dict()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--policy", choices=("every", "rank0", "naive"), default="every")
    parser.add_argument("--rank", type=int, default=0, help="this member's rank: {index}")
    parser.add_argument("--wait-timeout", type=float, default=30.0)
    args = parser.parse_args()
    try:
        config = load(snapshot(args.model, args.policy, args.rank, args.wait_timeout))
    except Exception:
        traceback.print_exc()
        print(
            f"server failed to start: rank {args.rank} could not load {args.model}",
            file=sys.stderr,
        )
        return 1
    serve(config, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
