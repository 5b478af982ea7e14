"""Shared by every benchmark script: arguments, timing helpers and the figure format.

Each ``bench_*.py`` is a plain script: ``python benchmarks/bench_x.py [--quick] [--json PATH]``.
It prints its figures and, with ``--json``, writes them as a list of objects:
``{"figure", "value", "unit", "target", "passed", "detail"}`` (``target``/``passed`` may be null).
Figures are medians, and comparisons are ratios measured side by side in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

Figure = dict[str, Any]


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat: a smoke run")
    parser.add_argument("--json", metavar="PATH", help="write the figures to PATH as JSON")
    return parser.parse_args()


def median_seconds(
    action: Callable[[], object], repeats: int, setup: Callable[[], object] | None = None
) -> float:
    """Median wall time of ``action`` over ``repeats`` runs (``setup`` runs untimed before each)."""
    samples = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def figure(
    name: str,
    value: float,
    unit: str,
    *,
    target: str | None = None,
    passed: bool | None = None,
    detail: str = "",
) -> Figure:
    return {
        "figure": name,
        "value": value,
        "unit": unit,
        "target": target,
        "passed": passed,
        "detail": detail,
    }


def emit(figures: list[Figure], args: argparse.Namespace) -> None:
    for item in figures:
        status = "" if item["passed"] is None else ("pass" if item["passed"] else "FAIL")
        target = item["target"] or ""
        print(
            f"{item['figure']:<60} {item['value']:>12.4g} {item['unit']:<8} {target:<12} {status}"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)
