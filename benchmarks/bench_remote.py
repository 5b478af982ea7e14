"""Remote: a cold start-up of 4 members against a warm one; states explored per second of a
real writer. Everything runs on loopback (a ``HubRemote`` on 127.0.0.1): no figure depends on
the network.

- cold / warm: 4 members of ``examples/servers/download_server.py`` (the real
  ``snapshot_download`` from the remote, then ``transformers.AutoConfig``), launched at once
  and known ready, with 64 MiB of weights (8 in ``--quick``), on an empty cache (cold) and on
  one where the commit was downloaded before, untimed (warm: each member still asks the remote
  for the revision). Per policy (``every``
  member downloads; ``rank0`` downloads while the others wait for the commit), cold and warm
  start-ups interleaved in a rotating order; medians with their spread, and cold / warm.
- states explored per second: ``server_fleet.explore_writer`` with the installed
  huggingface_hub's ``snapshot_download`` as the writer (refreshing a warm cache to a new
  commit, the seed incident) and one reader that reads the cache offline: pairs run / seconds
  spent running them.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import Figure, emit, figure, parse_args
from workbench import Bench, workbench

from pytest_startup_guard import FakeHubCache, ready
from pytest_startup_guard.fleet.launcher import FleetLauncher
from pytest_startup_guard.fleet.server_fleet import ServerFleet
from pytest_startup_guard.runtime.controller import RuntimeController

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SERVER = EXAMPLES / "servers" / "download_server.py"
REPO = "acme/tiny"
FILES: dict[str, Any] = {
    "config.json": {"model_type": "gpt2", "n_layer": 2, "n_embd": 64},
    "generation_config.json": {"max_new_tokens": 16},
    "tokenizer_config.json": {"model_max_length": 128},
    "model.safetensors": bytes(range(256)) * 64,
}
# MiB of weights in the cold / warm start-ups: enough that the download is a part of a cold
# start-up (an LFS file: huggingface_hub checks its sha256), little enough for 2 cores.
WEIGHTS_MIB = 64
QUICK_WEIGHTS_MIB = 8
# The reader of the explored refresh: reads every file of the repo from the cache, offline (as
# a member that is not rank 0 does), then serves /health; cheap, so the pairs are what is timed.
READER = f"""
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from huggingface_hub import hf_hub_download
for name in {sorted(name for name in FILES if name.endswith(".json"))!r}:
    with open(hf_hub_download({REPO!r}, name, local_files_only=True)) as handle:
        json.load(handle)
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


@contextmanager
def remote_test(place: Bench) -> Iterator[tuple[Any, FakeHubCache, ServerFleet]]:
    """One test's worth, as the fixtures set it up: an empty fake cache the child runtime
    watches, a hub on loopback serving into it, and fleets; all torn down after."""
    from pytest_startup_guard.remote.hub_remote import HubRemote

    place.counter += 1
    folder = place.folder / f"run-{place.counter}"
    cache = FakeHubCache(folder / "cache")
    controller = RuntimeController().start()
    controller.watch(cache.root)
    remote = HubRemote(cache)  # serving on 127.0.0.1 from here on
    fleets = ServerFleet(
        FleetLauncher(
            controller,
            folder / "fleet",
            place.leases,
            place.reaper,
            default_timeout=120,
            default_cache=cache,
        )
    )
    try:
        yield remote, cache, fleets
    finally:
        fleets.stop_all()
        remote.close()
        controller.close()
        shutil.rmtree(folder, ignore_errors=True)


def download_once(remote: Any) -> None:
    """Warm the cache: the real snapshot_download, in a process of its own (untimed)."""
    subprocess.run(
        [sys.executable, "-c", f"from huggingface_hub import snapshot_download; snapshot_download({REPO!r})"],
        env={**os.environ, **remote.env},
        check=True,
        capture_output=True,
    )  # fmt: skip


def start_up(place: Bench, policy: str, count: int, warm: bool, mib: int) -> tuple[float, int]:
    """One start-up of ``count`` members until every one is ready: (seconds, requests)."""
    with remote_test(place) as (remote, _cache, fleets):
        weights = bytes(range(256)) * (4096 * mib)
        remote.add_model(REPO, {**FILES, "model.safetensors": weights})
        if warm:
            download_once(remote)
        served = len(remote.requests)
        argv = [
            sys.executable, str(SERVER), "--model", REPO, "--port", "{port}",
            "--policy", policy, "--rank", "{index}",
        ]  # fmt: skip
        started = time.monotonic()
        fleet = fleets.launch(argv, count=count, ready=ready.http("/health"), env=remote.env)
        seconds = time.monotonic() - started
        fleet.assert_all_ready()
        remote.assert_cache_whole(REPO)
        return seconds, len(remote.requests) - served


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} to {max(values):.2f}"


def cold_against_warm(
    place: Bench, policy: str, count: int, repeats: int, mib: int
) -> list[Figure]:
    times: dict[bool, list[float]] = {False: [], True: []}
    requests: dict[bool, int] = {}
    for run in range(repeats):  # interleaved, rotating which goes first
        for warm in (False, True) if run % 2 == 0 else (True, False):
            seconds, served = start_up(place, policy, count, warm, mib)
            times[warm].append(seconds)
            requests[warm] = served
    cold, warm = statistics.median(times[False]), statistics.median(times[True])
    return [
        figure(
            f"remote: {policy}, {count} members, {mib} MiB: cold start-up to ready",
            1000 * cold,
            "ms",
            detail=f"spread {spread(times[False])} s over {repeats} runs; {requests[False]}"
            " requests served",
        ),
        figure(
            f"remote: {policy}, {count} members, {mib} MiB: warm start-up to ready",
            1000 * warm,
            "ms",
            detail=f"spread {spread(times[True])} s over {repeats} runs; {requests[True]}"
            " requests served",
        ),
        figure(
            f"remote: {policy}, {count} members, {mib} MiB: cold / warm start-up",
            cold / warm,
            "x",
            detail=f"medians of {repeats} interleaved runs each",
        ),
    ]


def states_per_second(place: Bench, quick: bool) -> list[Figure]:
    """The real writer refreshing a warm cache to a new commit, one reader at each point."""
    with remote_test(place) as (remote, _cache, fleets):
        remote.add_model(REPO, FILES)
        download_once(remote)
        remote.push(REPO, {"config.json": {**FILES["config.json"], "n_layer": 4}})
        exploration = fleets.explore_writer(
            remote.writer(REPO),
            [sys.executable, "-c", READER, "{port}"],
            count=1,
            ready=ready.http("/health"),
            env=remote.env,
            pairs=[(1, 1), (2, 1)] if quick else None,
        )
    return [
        figure(
            "remote: states explored per second, snapshot_download refreshing a warm cache",
            exploration.states_per_second,
            "states/s",
            detail=f"{exploration.states} pairs ({len(exploration.steps)} writer steps x"
            f" {len(exploration.points)} reader points) in {exploration.pairs_seconds:.1f} s;"
            f" {len(exploration.failures)} failed; whole exploration {exploration.seconds:.1f} s",
        )
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    repeats = 1 if args.quick else 5
    count = 2 if args.quick else 4
    policies = ("every",) if args.quick else ("every", "rank0")
    mib = QUICK_WEIGHTS_MIB if args.quick else WEIGHTS_MIB
    figures: list[Figure] = []
    with workbench() as place:
        for policy in policies:
            figures += cold_against_warm(place, policy, count, repeats, mib)
        figures += states_per_second(place, args.quick)
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
