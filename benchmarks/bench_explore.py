"""Exploring every access point of a fleet's start-up: parallel against sequential against clean.

Two start-ups, each explored with ``pointer_swap`` on ``config.json`` by servers that retry (so
every point is survived and every run goes all the way to ready):

- the example server: ``config_server.py --loader autoconfig --policy retry`` (the incident's
  server, ``transformers.AutoConfig``), a fleet of 4;
- a start-up with 16 access points: a small server that reads 8 files of the repo with
  ``hf_hub_download`` (two accesses each) and a bounded retry, a fleet of 4 and, for the parallel mode, also 17
  members per launch (every point and the clean member in one launch).

Per start-up, interleaved in a rotating order: one clean start-up of the fleet,
``server_fleet.explore(..., mode="parallel")`` and ``mode="sequential"``, each pruned (the
default: one point of each group of equivalent points is run, the others covered) and with
``prune=False`` (every point run). Figures: medians, each mode's time over the clean
start-up's (target: every point explored, pruned, in parallel mode, in at most 2x one clean
start-up), with the spread of the runs.
"""

from __future__ import annotations

import statistics
import sys
import time

from harness import Figure, emit, figure, parse_args
from workbench import Bench, server_command, workbench

from pytest_startup_guard import ready

FILES = 8
MANY_FILES_SERVER = f"""
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
from huggingface_hub import hf_hub_download
for index in range({FILES}):
    for attempt in range(20):  # a bounded retry: every point is survived
        try:
            with open(hf_hub_download("acme/tiny", "part-%d.json" % index)) as handle:
                json.load(handle)
            break
        except (OSError, ValueError):
            time.sleep(0.02)
    else:
        sys.exit("could not read part-%d.json" % index)
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def many_files_command() -> list[str]:
    return [sys.executable, "-c", MANY_FILES_SERVER, "{port}"]


def example_command() -> list[str]:
    return server_command("retry", "autoconfig")


def clean(bench: Bench, argv: list[str], count: int, files: bool) -> float:
    with bench.test() as (cache, _races, fleets):
        add_parts(cache, files)
        started = time.monotonic()
        fleets.launch(argv, count=count, ready=ready.http("/health")).assert_all_ready()
        return time.monotonic() - started


def explored(
    bench: Bench, argv: list[str], count: int, mode: str, files: bool, prune: bool
) -> tuple[float, int, int, int]:
    """(seconds, points, points run, launches)."""
    with bench.test() as (cache, _races, fleets):
        add_parts(cache, files)
        started = time.monotonic()
        exploration = fleets.explore(
            argv,
            "pointer_swap",
            cache.repo("acme/tiny"),
            "config.json" if not files else "part-0.json",
            count=count,
            ready=ready.http("/health"),
            mode=mode,
            hold=0.05,
            prune=prune,
        )
        seconds = time.monotonic() - started
        exploration.assert_all_survived()
        return seconds, len(exploration.points), len(exploration.explored), exploration.launches


def add_parts(cache: object, files: bool) -> None:
    if files:
        from workbench import CONFIG

        parts = {f"part-{index}.json": {"index": index} for index in range(FILES)}
        cache.add_model("acme/tiny", {**CONFIG, **parts})  # type: ignore[attr-defined]


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} to {max(values):.2f}"


def main() -> None:
    args = parse_args(__doc__ or "")
    repeats = 1 if args.quick else 5
    count = 2 if args.quick else 4
    wide = 5 if args.quick else 4 * FILES // 2 + 1  # every point and the clean member at once
    figures: list[Figure] = []
    setups = [
        (
            "example server",
            example_command(),
            False,
            [
                ("parallel", count, True),
                ("parallel", count, False),
                ("sequential", count, True),
                ("sequential", count, False),
            ],
        ),
        (
            f"{2 * FILES} points",
            many_files_command(),
            True,
            [
                ("parallel", count, True),
                ("parallel", count, False),
                ("parallel", wide, False),
                ("sequential", count, True),
                ("sequential", count, False),
            ],
        ),
    ]
    with workbench() as bench:
        for name, argv, files, modes in setups:
            if args.quick:  # a smoke run: the pruned modes, and running every point once
                modes = [mode for mode in modes if mode[2]] + [("parallel", count, False)]
            cleans: list[float] = []
            times: dict[tuple[str, int, bool], list[float]] = {mode: [] for mode in modes}
            shape: dict[tuple[str, int, bool], tuple[int, int, int]] = {}
            kinds: list[tuple[str, int, bool] | None] = [None, *modes]
            for run in range(repeats):  # interleaved, rotating which goes first
                for kind in kinds[run % len(kinds) :] + kinds[: run % len(kinds)]:
                    if kind is None:
                        cleans.append(clean(bench, argv, count, files))
                    else:
                        seconds, *counts = explored(bench, argv, kind[1], kind[0], files, kind[2])
                        times[kind].append(seconds)
                        shape[kind] = (counts[0], counts[1], counts[2])
            base = statistics.median(cleans)
            figures.append(
                figure(
                    f"explore, {name}: clean start-up of {count}",
                    1000 * base,
                    "ms",
                    detail=f"spread {spread(cleans)} s",
                )
            )
            for (mode, members, prune), values in times.items():
                ratio = statistics.median(values) / base
                points, run_points, launches = shape[(mode, members, prune)]
                targeted = mode == "parallel" and prune
                how = "pruned" if prune else "every point"
                figures.append(
                    figure(
                        f"explore, {name}: {mode}, {members} members, {how} / clean start-up",
                        ratio,
                        "x",
                        target="<= 2.0" if targeted else None,
                        passed=ratio <= 2.0 if targeted else None,
                        detail=f"{points} points ({run_points} run) in {launches} launch(es), median"
                        f" {statistics.median(values):.2f} s (spread {spread(values)} s) over"
                        f" {repeats} interleaved runs",
                    )
                )
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
