"""Catching the incident: the examples' naive server, 4 processes at once, every transient race.

A run is one start-up of a fleet of 4 ``config_server.py --policy naive`` servers (no retry,
``transformers.AutoConfig``) on a fake cache; it catches the bug when any server fails. Side by
side, in one run of this script:

- deterministic, for every race of ``transient="all"`` (pointer_swap, ref_rewrite,
  blob_rewrite, dangling_pointer): ``hub_race.arm(race, repo, "config.json")`` (the default
  ``on_access()``), each raced start-up interleaved with a clean one;

and for the incident's two races (pointer_swap, ref_rewrite) also:

- seeded chaos: ``trigger=chaos(gap=0.001, seed=run)``, the plugin's refresher process;
- the CI baseline: the real writer in a loop with a 1 ms gap — huggingface_hub's own
  ``_create_symlink`` for ``pointer_swap``, and ``snapshot_download``'s in-place ref write (up to 1.30.0)
  (``open(ref, "w")`` then ``write(commit)``) for ``ref_rewrite``.

Time to the first failure: for a catching run, from the launch to the first server that fails;
across runs, what CI waits for: median run time / share of runs that catch. The deterministic
target is 100% of runs, and the first failure before a clean start-up of the same fleet would
have ended (<= 1.0x: the servers die at their config read, long before they are ready), as the
median of the interleaved pairs' ratios, with their spread.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from harness import Figure, emit, figure, parse_args
from workbench import Bench, first_failure, server_command, workbench

from pytest_startup_guard import chaos, ready
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.server_fleet import ServerFleet
from pytest_startup_guard.races.catalog import races_for_all

SERVERS = 4  # the incident's --api-server-count=4 (2 in --quick mode)

REAL_WRITERS = {
    "pointer_swap": """
import sys, time
from huggingface_hub.file_download import _create_symlink
blob, pointer, ref, commit = sys.argv[1:5]
print("ready", flush=True)
while True:
    _create_symlink(blob, pointer)  # os.remove(pointer), relpath + symlink probe, os.symlink
    time.sleep(0.001)
""",
    "ref_rewrite": """
import sys, time
blob, pointer, ref, commit = sys.argv[1:5]
print("ready", flush=True)
while True:
    with open(ref, "w") as f:  # snapshot_download up to huggingface_hub 1.30.0
        f.write(commit)
    time.sleep(0.001)
""",
}


def launch(fleets: ServerFleet, policy: str = "naive") -> tuple[Fleet, float]:
    started = time.monotonic()
    fleet = fleets.launch(
        server_command(policy, "autoconfig"), count=SERVERS, ready=ready.http("/health")
    )
    return fleet, started


def run_mode(bench: Bench, mode: str, race: str, run: int) -> tuple[float | None, float]:
    """One start-up under the race; (seconds to the first failure or None, seconds of the run)."""
    with bench.test(seed=run) as (cache, races, fleets):
        repo = cache.repo("acme/tiny")
        writer = None
        if mode == "deterministic":
            races.arm(race, repo, "config.json")
        elif mode == "chaos":
            races.arm(
                race, repo, "config.json", trigger=chaos(gap=0.001, seed=run), allow_miss=True
            )
        else:
            env = {k: v for k, v in os.environ.items() if not k.startswith("STARTUP_GUARD_")}
            paths = [
                str(repo.blob("config.json")),
                str(repo.pointer("config.json")),
                str(repo.ref()),
                repo.commit,
            ]
            writer = subprocess.Popen(
                [sys.executable, "-c", REAL_WRITERS[race], *paths],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        try:
            fleet, started = launch(fleets)
            elapsed = time.monotonic() - started
            return first_failure(fleet, started), elapsed
        finally:
            if writer is not None:
                writer.kill()
                writer.wait()
                for armed in [
                    races.arm("pointer_swap", repo, "config.json", allow_miss=True),
                    races.arm("ref_rewrite", repo, "config.json", allow_miss=True),
                ]:
                    armed.race.close(armed.target)  # what the writer was killed in the middle of


def clean_startup(bench: Bench) -> float:
    with bench.test() as (_cache, _races, fleets):
        fleet, started = launch(fleets)
        fleet.assert_all_ready()
        return time.monotonic() - started


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} to {max(values):.2f}" if values else "-"


def deterministic_figures(bench: Bench, race: str, pairs: int) -> list[Figure]:
    """``pairs`` raced start-ups, each after a clean one: the share caught, and the first
    failure over the clean start-up of its pair (median and spread of the pairs' ratios)."""
    ratios, firsts, cleans = [], [], []
    for run in range(pairs):
        clean = clean_startup(bench)
        first, _elapsed = run_mode(bench, "deterministic", race, run)
        cleans.append(clean)
        if first is not None:
            firsts.append(first)
            ratios.append(first / clean)
    share = len(firsts) / pairs
    label = f"incident: {race}, deterministic"
    figures = [
        figure(
            f"{label}: runs that catch it",
            100 * share,
            "%",
            target="100%",
            passed=share == 1.0,
            detail=f"{len(firsts)}/{pairs} start-ups of {SERVERS} naive servers",
        )
    ]
    if ratios:
        ratio = statistics.median(ratios)
        figures.append(
            figure(
                f"{label}: first failure / clean start-up",
                ratio,
                "x",
                target="<= 1.0",
                passed=ratio <= 1.0,
                detail=f"median of {len(ratios)} interleaved pairs, spread {spread(ratios)};"
                f" first failure {1000 * statistics.median(firsts):.0f} ms,"
                f" clean {1000 * statistics.median(cleans):.0f} ms",
            )
        )
    return figures


def main() -> None:
    global SERVERS
    args = parse_args(__doc__ or "")
    runs = 1 if args.quick else 6
    pairs = 1 if args.quick else 7
    if args.quick:
        SERVERS = 2
    figures: list[Figure] = []
    with workbench() as bench:
        clean = statistics.median(clean_startup(bench) for _ in range(1 if args.quick else 3))
        figures.append(
            figure(f"incident: clean start-up of {SERVERS} naive servers", 1000 * clean, "ms")
        )
        for race in races_for_all():
            figures.extend(deterministic_figures(bench, race, pairs))
        for race in ("pointer_swap", "ref_rewrite"):
            for mode in ("chaos", "real writer, 1 ms gap (CI)"):
                results = [run_mode(bench, mode.split(",")[0], race, run) for run in range(runs)]
                firsts = [first for first, _ in results if first is not None]
                share = len(firsts) / len(results)
                label = f"incident: {race}, {mode}"
                figures.append(
                    figure(
                        f"{label}: runs that catch it",
                        100 * share,
                        "%",
                        detail=f"{len(firsts)}/{len(results)} start-ups of {SERVERS} naive servers",
                    )
                )
                run_time = statistics.median(elapsed for _, elapsed in results)
                waited = run_time / share if share else float("inf")
                figures.append(
                    figure(
                        f"{label}: expected time to the first failure",
                        waited,
                        "s",
                        detail="median run time / share of runs that catch it (inf: none caught)",
                    )
                )
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
