"""Import races and start methods: the cost of one import_race sweep, the scan, the checks.

The sweep's cost is one measurement pair plus (orders x delays x repeats) fresh interpreters,
two at a time; a module's import time sets it. transformers stands for the incident (its import
in a background thread broke a start-up: docs/imports.md); examples/imports/plain_lib for a safe module of a similar (0.3 s) import time.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path

from harness import Figure, emit, figure, parse_args

from pytest_startup_guard import check_start_methods, import_race, scan_background_imports
from pytest_startup_guard.imports.probe import DEFAULT_FRACTIONS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "imports"
QUICK_FRACTIONS = (0.3,)  # one delay per order: a smoke run of the same code path


def timed_probe(module: str, attrs: tuple[str, ...], repeats: int, quick: bool) -> list[Figure]:
    samples, failed, runs = [], [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        result = import_race(
            module,
            attrs,
            pythonpath=[EXAMPLES],
            fractions=QUICK_FRACTIONS if quick else DEFAULT_FRACTIONS,
        )
        samples.append(time.perf_counter() - started)
        failed.append(len(result.failures))
        runs = len(result.runs)
    seconds = statistics.median(samples)
    unsafe = module != "plain_lib"
    caught = min(failed)
    return [
        figure(
            f"imports: one import_race call on {module} ({runs} runs)",
            seconds,
            "s",
            target="< 30 s",
            passed=seconds < 30,
            detail=f"median of {repeats}; import time {result.import_seconds * 1000:.0f} ms",
        ),
        figure(
            f"imports: failed runs of that call on {module}",
            caught,
            "runs",
            target=">= 1 of every call" if unsafe else "0",
            passed=caught >= 1 if unsafe else max(failed) == 0,
            detail=f"fewest failed runs over {repeats} calls of {runs} runs each",
        ),
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    repeats = 1 if args.quick else 3
    figures: list[Figure] = []
    if importlib.util.find_spec("transformers") is not None:
        figures += timed_probe(
            "transformers", ("GenerationConfig", "PretrainedConfig"), repeats, args.quick
        )
    figures += timed_probe("plain_lib", ("AutoThing",), repeats, args.quick)

    started = time.perf_counter()
    for _ in range(repeats * 5):
        report = scan_background_imports(EXAMPLES / "acme_server")
    scan_ms = (time.perf_counter() - started) / (repeats * 5) * 1000
    figures.append(
        figure(
            f"imports: scan of the example package ({report.files} files)",
            scan_ms,
            "ms",
            detail=f"{len(report.errors)} errors, {len(report.warnings)} warnings found",
        )
    )

    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        check_start_methods("acme_server.good_multiproc:main", pythonpath=[EXAMPLES])
        samples.append(time.perf_counter() - started)
    figures.append(
        figure(
            "imports: check_start_methods, 4 modes of a small start-up",
            statistics.median(samples),
            "s",
            detail=f"median of {repeats}; two interpreters at a time",
        )
    )
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
