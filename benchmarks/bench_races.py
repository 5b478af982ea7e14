"""Races: how surely and how fast a no-retry loader in 4 processes is caught.

A run is one start-up of 4 reader processes at once: each loads the config once with the real
``transformers.AutoConfig`` and no retry, as a server does at start-up. Side by side, in one
run, on the same 4 readers:

- deterministic: ``pointer_swap`` with ``on_access()`` (the plugin's default trigger);
- seeded chaos: ``pointer_swap`` with ``chaos(gap=0.001)`` (the plugin's refresher process);
- the CI baseline: the real ``huggingface_hub`` ``_create_symlink`` in a loop with a 1 ms
  sleep between swaps (measured with 4 readers on 2 cores: the pointer absent ~10% of the time,
  ~0.7% of reads failed).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import Figure, emit, figure, parse_args

from pytest_startup_guard import FakeHubCache, chaos, on_access
from pytest_startup_guard.cache.env import HubEnvironment
from pytest_startup_guard.races.hubrace import HubRace
from pytest_startup_guard.runtime.controller import RuntimeController

READER = """
import json, sys, time
from transformers import AutoConfig
print("ready", flush=True)
for line in sys.stdin:
    start = time.monotonic()
    try:
        AutoConfig.from_pretrained("acme/tiny")
        result = {"caught": False, "after": time.monotonic() - start}
    except Exception as error:
        result = {"caught": True, "after": time.monotonic() - start, "error": type(error).__name__}
    print(json.dumps(result), flush=True)
"""

REAL_REFRESHER = """
import os, sys, time
from huggingface_hub.file_download import _create_symlink
blob, pointer = sys.argv[1], sys.argv[2]
print("ready", flush=True)
while True:
    _create_symlink(blob, pointer)   # os.remove(pointer), relpath + probe, os.symlink
    time.sleep(0.001)
"""


def start_readers(env: dict[str, str], count: int) -> list[subprocess.Popen[str]]:
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(count)
    ]
    for reader in readers:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
    return readers


def round_of(readers: list[subprocess.Popen[str]]) -> list[dict[str, object]]:
    """One start-up: every reader loads once, at the same moment."""
    for reader in readers:
        assert reader.stdin is not None
        reader.stdin.write("go\n")
        reader.stdin.flush()
    results = []
    for reader in readers:
        assert reader.stdout is not None
        results.append(json.loads(reader.stdout.readline()))
    return results


def summarize(mode: str, rounds: list[list[dict[str, object]]]) -> list[Figure]:
    caught = [r for r in rounds if any(p["caught"] for p in r)]
    share = len(caught) / len(rounds)
    figures = [
        figure(
            f"races: {mode}: share of runs that catch the bug",
            100 * share,
            "%",
            target="100%" if mode == "deterministic" else None,
            passed=(share == 1.0) if mode == "deterministic" else None,
            detail=f"{len(caught)}/{len(rounds)} start-ups of 4 no-retry readers",
        )
    ]
    if caught:
        firsts = [min(float(str(p["after"])) for p in r if p["caught"]) for r in caught]
        figures.append(
            figure(
                f"races: {mode}: median time to the first failure in a catching run",
                1000 * statistics.median(firsts),
                "ms",
            )
        )
    return figures


def main() -> None:
    args = parse_args(__doc__ or "")
    runs = 3 if args.quick else 50
    base = Path(tempfile.mkdtemp(prefix="bench-races-"))
    cache = FakeHubCache(base / "cache")
    repo = cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    environment = HubEnvironment(cache.env)
    environment.apply()
    figures: list[Figure] = []
    try:
        with RuntimeController() as controller:
            controller.watch(cache.root)
            env = {**os.environ, **controller.env}
            readers = start_readers(env, 4)
            try:
                races = HubRace(controller, seed=1234)
                deterministic = []
                for _ in range(runs):
                    armed = races.arm("pointer_swap", repo, "config.json", trigger=on_access())
                    deterministic.append(round_of(readers))
                    armed.disarm()
                figures += summarize("deterministic", deterministic)
                seeded = []
                for run in range(runs):
                    armed = races.arm(
                        "pointer_swap",
                        repo,
                        "config.json",
                        trigger=chaos(gap=0.001, seed=run),
                        allow_miss=True,
                    )
                    seeded.append(round_of(readers))
                    armed.disarm()
                figures += summarize("seeded chaos (gap 1 ms)", seeded)
                races.close()
                baseline = []
                for _ in range(runs):
                    refresher = subprocess.Popen(
                        [
                            sys.executable,
                            "-c",
                            REAL_REFRESHER,
                            str(repo.blob("config.json")),
                            str(repo.pointer("config.json")),
                        ],
                        env={k: v for k, v in os.environ.items() if k != "STARTUP_GUARD_PLAN"},
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    assert (
                        refresher.stdout is not None
                        and refresher.stdout.readline().strip() == "ready"
                    )
                    baseline.append(round_of(readers))
                    refresher.kill()
                    refresher.wait()
                    if not os.path.lexists(repo.pointer("config.json")):
                        os.symlink(
                            os.path.relpath(
                                repo.blob("config.json"), repo.pointer("config.json").parent
                            ),
                            repo.pointer("config.json"),
                        )
                figures += summarize("real _create_symlink loop, 1 ms gap (CI)", baseline)
            finally:
                for reader in readers:
                    reader.kill()
                    reader.wait()
    finally:
        environment.restore()
        shutil.rmtree(base, ignore_errors=True)
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
