"""Exploring every access point of a fleet's start-up: each mode against one clean start-up,
and how often opt-in pruning ends as running every point.

Two start-ups, each explored with ``pointer_swap`` by servers that retry (so every point is
survived and every run goes all the way to ready):

- the example server: ``config_server.py --loader autoconfig --policy retry`` (the incident's
  server, ``transformers.AutoConfig``), a fleet of 4;
- a start-up with 16 access points: a small server that reads 8 files of the repo with
  ``hf_hub_download`` (two accesses each) and a bounded retry, a fleet of 4.

Per start-up, interleaved in a rotating order: one clean start-up of the fleet, and
``server_fleet.explore`` with every point run (the default) in parallel mode (4 members per
launch; every point and the clean member in one launch; the same forked from a warm template)
and in sequential mode, and with opt-in pruning (``prune=True``) beside them. Figures: medians,
each mode's time over the clean start-up's (target: every point run, in parallel mode, in at
most 2x one clean start-up), with the spread of the runs.

``agreement``: over start-ups built to break the equivalence of points
(``break_equivalence.py``: at least 30, drawn the same every run), each explored with every
point run and with ``prune=True``, the share of points, and of verdicts (every point survived
or not), where the two end alike (target 100 %).
"""

from __future__ import annotations

import statistics
import sys
import time

from break_equivalence import FILES as VARIANT_FILES
from break_equivalence import HOLD, Variant, variants
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


# How a start-up is explored: mode, members per launch, opt-in pruning, forked from a warm
# template (the modules it preloads).
Kind = tuple[str, int, bool, tuple[str, ...]]


def explored(bench: Bench, argv: list[str], kind: Kind, files: bool) -> tuple[float, int, int, int]:
    """(seconds, points, points run, launches)."""
    mode, count, prune, preload = kind
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
            **({"warm": True, "preload": list(preload)} if preload else {}),  # type: ignore[arg-type]
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


def agreement(bench: Bench, variant: Variant) -> tuple[int, int, bool, int]:
    """Explore ``variant`` with every point run, then with ``prune=True``: (points, points that
    ended alike, whether the verdicts agree, points pruning inferred)."""
    ends = []
    inferred = 0
    for prune in (False, True):
        with bench.test() as (cache, _races, fleets):
            repo = cache.add_model(
                "acme/tiny",
                {"config.json": {"model_type": "gpt2"}, **{f: {"f": f} for f in VARIANT_FILES[1:]}},
            )
            exploration = fleets.explore(
                variant.argv(),
                variant.race,
                repo,
                variant.filename,
                count=variant.count,
                ready=ready.http("/health"),
                hold=HOLD,
                prune=prune,
            )
            ends.append([(p.point.number, p.outcome) for p in exploration.points])
            inferred = len(exploration.covered)  # the older name: main's pruning has no other
    full, pruned = ends
    alike = sum(1 for a, b in zip(full, pruned, strict=False) if a == b)
    verdict = all(o == "survived" for _, o in full) == all(o == "survived" for _, o in pruned)
    return len(full), alike, verdict, inferred


def agreement_figures(bench: Bench, how_many: int) -> list[Figure]:
    points = alike = verdicts = inferred = 0
    disagreeing = []
    for variant in variants(how_many):
        found, same, verdict, guessed = agreement(bench, variant)
        points, alike, verdicts = points + found, alike + same, verdicts + verdict
        inferred += guessed
        if same != found or not verdict:
            disagreeing.append(f"#{variant.number} {variant.words()}")
        print(f"agreement #{variant.number}: {same} of {found} points alike", file=sys.stderr)
    share, verdict_share = 100 * alike / max(points, 1), 100 * verdicts / how_many
    detail = (
        f"{how_many} start-ups built to break equivalence, {points} points, {inferred} of them"
        " inferred by prune=True"
    ) + ("; disagreeing: " + " | ".join(disagreeing) if disagreeing else "")
    return [
        figure(
            "explore, agreement: points where prune=True ends as every point run",
            share,
            "%",
            target="100",
            passed=share == 100,
            detail=detail,
        ),
        figure(
            "explore, agreement: verdicts where prune=True ends as every point run",
            verdict_share,
            "%",
            target="100",
            passed=verdict_share == 100,
            detail=detail,
        ),
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    repeats = 1 if args.quick else 5
    count = 2 if args.quick else 4
    wide = 5 if args.quick else 4 * FILES // 2 + 1  # every point and the clean member at once
    hub: tuple[str, ...] = ("huggingface_hub",)
    figures: list[Figure] = []
    setups: list[tuple[str, list[str], bool, list[Kind]]] = [
        (
            "example server",
            example_command(),
            False,
            [
                ("parallel", count, False, ()),
                ("parallel", count, False, ("transformers",)),
                ("sequential", count, False, ()),
                ("parallel", count, True, ()),
            ],
        ),
        (
            f"{2 * FILES} points",
            many_files_command(),
            True,
            [
                ("parallel", count, False, ()),
                ("parallel", wide, False, ()),
                ("parallel", wide, False, hub),
                ("sequential", count, False, ()),
                ("parallel", count, True, ()),
            ],
        ),
    ]
    with workbench() as bench:
        for name, argv, files, modes in setups:
            if args.quick:  # a smoke run: every point in parallel, cold and warm, and pruned
                modes = [m for m in modes if m[0] == "parallel" and m[1] == count]
            cleans: list[float] = []
            times: dict[Kind, list[float]] = {mode: [] for mode in modes}
            shape: dict[Kind, tuple[int, int, int]] = {}
            kinds: list[Kind | None] = [None, *modes]
            for run in range(repeats):  # interleaved, rotating which goes first
                for kind in kinds[run % len(kinds) :] + kinds[: run % len(kinds)]:
                    if kind is None:
                        cleans.append(clean(bench, argv, count, files))
                    else:
                        seconds, *counts = explored(bench, argv, kind, files)
                        times[kind].append(seconds)
                        shape[kind] = (counts[0], counts[1], counts[2])
            figures += explore_figures(name, count, cleans, times, shape, repeats)
        figures += agreement_figures(bench, 3 if args.quick else 30)
    emit(figures, args)


def explore_figures(
    name: str,
    count: int,
    cleans: list[float],
    times: dict[Kind, list[float]],
    shape: dict[Kind, tuple[int, int, int]],
    repeats: int,
) -> list[Figure]:
    base = statistics.median(cleans)
    figures = [
        figure(
            f"explore, {name}: clean start-up of {count}",
            1000 * base,
            "ms",
            detail=f"spread {spread(cleans)} s",
        )
    ]
    for (mode, members, prune, preload), values in times.items():
        ratio = statistics.median(values) / base
        points, run_points, launches = shape[(mode, members, prune, preload)]
        targeted = mode == "parallel" and not prune
        how = "prune=True" if prune else "every point"
        warm = f", forked from a template preloading {', '.join(preload)}" if preload else ""
        figures.append(
            figure(
                f"explore, {name}: {mode}, {members} members, {how}{warm} / clean start-up",
                ratio,
                "x",
                target="<= 2.0" if targeted else None,
                passed=ratio <= 2.0 if targeted else None,
                detail=f"{points} points ({run_points} run) in {launches} launch(es), median"
                f" {statistics.median(values):.2f} s (spread {spread(values)} s) over"
                f" {repeats} interleaved runs",
            )
        )
    return figures


if __name__ == "__main__":
    sys.exit(main())
