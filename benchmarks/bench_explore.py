"""Exploring every access point of a fleet's start-up: each mode against one clean start-up,
and how often opt-in pruning ends as running every point.

Two start-ups, each explored with ``pointer_swap`` by servers that retry (so every point is
survived and every run goes all the way to ready):

- the example server: ``config_server.py --loader autoconfig --policy retry`` (the incident's
  server, ``transformers.AutoConfig``), a fleet of 4;
- a start-up with 16 access points: a small server that reads 8 files of the repo with
  ``hf_hub_download`` (two accesses each) and a bounded retry, a fleet of 4.

Per start-up, interleaved in a rotating order: one clean start-up of the fleet (cold), and
``server_fleet.explore`` with every point run (the default) in parallel mode (4 members per
launch, cold and forked from a warm template as ``warm=True`` forks them; for the 16 points also
every point and the clean member in one launch, cold and forked) and in sequential mode, and
with opt-in pruning (``prune=True``) beside them. Figures: medians, each mode's time over the
clean start-up's (target: every point run by forking, in parallel mode, in at most 2x one clean
start-up), with the spread of the runs.

``agreement``: over start-ups built to break the equivalence of points
(``break_equivalence.py``: at least 30, drawn the same every run), each explored with every
point run cold and by each fast path (``prune=True``; every point by members forked from a warm
template, ``warm=True``), the share of points, and of verdicts (every point survived or not),
where the fast path ends as the cold one (target 100 %).
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field

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
# template (the modules it preloads: FORKED for the ones the probe finds, as ``warm=True`` does).
Kind = tuple[str, int, bool, tuple[str, ...]]
FORKED = ("(found by the probe)",)


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
            **warm_options(preload),  # type: ignore[arg-type]
        )
        seconds = time.monotonic() - started
        exploration.assert_all_survived()
        return seconds, len(exploration.points), len(exploration.explored), exploration.launches


def warm_options(preload: tuple[str, ...]) -> dict[str, object]:
    """Cold (no modules), forked as ``warm=True`` forks (FORKED), or preloading those named."""
    if not preload:
        return {}
    if preload == FORKED:
        return {"warm": True}
    return {"warm": True, "preload": list(preload)}


def add_parts(cache: object, files: bool) -> None:
    if files:
        from workbench import CONFIG

        parts = {f"part-{index}.json": {"index": index} for index in range(FILES)}
        cache.add_model("acme/tiny", {**CONFIG, **parts})  # type: ignore[attr-defined]


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} to {max(values):.2f}"


# The fast paths the agreement figure holds against every point run cold: opt-in pruning, and
# every point run by members forked from a warm template (``warm=True``).
FAST_PATHS: dict[str, dict[str, object]] = {
    "prune=True": {"prune": True},
    "forked (warm=True)": {"warm": True},
}


@dataclass
class Agreement:
    """One fast path over the start-ups: points, those that ended as cold ones, verdicts alike,
    points it inferred, and the start-ups where it disagreed."""

    points: int = 0
    alike: int = 0
    verdicts: int = 0
    inferred: int = 0
    disagreeing: list[str] = field(default_factory=list)


def explore_ends(
    bench: Bench, variant: Variant, options: dict[str, object]
) -> tuple[list[tuple[int, str]], int]:
    """Each point's (number, outcome) of ``variant`` explored with ``options``, and how many
    points were inferred."""
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
            **options,  # type: ignore[arg-type]
        )
        ends = [(p.point.number, p.outcome) for p in exploration.points]
        return ends, len(exploration.covered)  # the older name: main's pruning has no other


def agreement_figures(bench: Bench, how_many: int, quick: bool = False) -> list[Figure]:
    """Every start-up explored with every point run cold, then by each fast path: the share of
    points and of verdicts (every point survived or not) where the two end alike. ``quick``:
    the one of the first six with the fewest reads for each member (a smoke run)."""
    found = {name: Agreement() for name in FAST_PATHS}
    drawn = variants(how_many)
    if quick:
        drawn = [min(variants(6), key=lambda v: sum(step["passes"] for step in v.steps) * v.count)]
    for variant in drawn:
        full, _ = explore_ends(bench, variant, {})
        survived = all(outcome == "survived" for _, outcome in full)
        for name, options in FAST_PATHS.items():
            fast, inferred = explore_ends(bench, variant, options)
            tally = found[name]
            same = sum(1 for a, b in zip(full, fast, strict=False) if a == b)
            verdict = survived == all(outcome == "survived" for _, outcome in fast)
            tally.points += len(full)
            tally.alike += same if len(fast) == len(full) else 0
            tally.verdicts += verdict
            tally.inferred += inferred
            if same != len(full) or len(fast) != len(full) or not verdict:
                tally.disagreeing.append(f"#{variant.number} {variant.words()}")
            print(
                f"agreement #{variant.number}, {name}: {same} of {len(full)} points alike",
                file=sys.stderr,
            )
    figures = []
    for name, tally in found.items():
        share, verdict_share = (
            100 * tally.alike / max(tally.points, 1),
            100 * tally.verdicts / how_many,
        )
        detail = (
            f"{how_many} start-ups built to break equivalence, {tally.points} points, "
            f"{tally.inferred} of them inferred"
        ) + ("; disagreeing: " + " | ".join(tally.disagreeing) if tally.disagreeing else "")
        for what, value in (("points", share), ("verdicts", verdict_share)):
            figures.append(
                figure(
                    f"explore, agreement: {what} where {name} ends as every point run cold",
                    value,
                    "%",
                    target="100",
                    passed=value == 100,
                    detail=detail,
                )
            )
    return figures


def main() -> None:
    args = parse_args(__doc__ or "")
    repeats = 1 if args.quick else 5
    count = 2 if args.quick else 4
    wide = 5 if args.quick else 4 * FILES // 2 + 1  # every point and the clean member at once
    figures: list[Figure] = []
    setups: list[tuple[str, list[str], bool, list[Kind]]] = [
        (
            "example server",
            example_command(),
            False,
            [
                ("parallel", count, False, ()),
                ("parallel", count, False, FORKED),
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
                ("parallel", count, False, FORKED),
                ("parallel", wide, False, ()),
                ("parallel", wide, False, FORKED),
                ("sequential", count, False, ()),
                ("parallel", count, True, ()),
            ],
        ),
    ]
    with workbench() as bench:
        for name, argv, files, modes in setups:
            if args.quick:  # a smoke run: every point in parallel, forked
                modes = [m for m in modes if m[0] == "parallel" and m[1] == count and m[3]]
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
        figures += agreement_figures(bench, 1 if args.quick else 30, quick=args.quick)
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
        # The target is exploring by forking (issue 41): cold, every point costs a start-up.
        targeted = mode == "parallel" and not prune and bool(preload)
        how = "prune=True" if prune else "every point"
        warm = ""
        if preload == FORKED:
            warm = ", forked from a warm template (warm=True: the modules the probe finds)"
        elif preload:
            warm = f", forked from a template preloading {', '.join(preload)}"
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
