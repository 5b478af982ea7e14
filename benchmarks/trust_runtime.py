"""What the ``.pth`` boot line costs a Python start-up with no plan set: ``measure_pth_cost``.

Installing the plugin puts one line in site-packages (``startup_guard_boot.pth``), which
``site`` runs at every interpreter start-up, under test or not. Measured in a scratch venv of
the same interpreter with nothing else installed (no other ``.pth`` file: the smallest
start-up, so the largest share), ``python -c pass`` with no ``STARTUP_GUARD_*`` variable,
``runs`` times with the line and ``runs`` times without, in pairs whose order is drawn at
random (seeded): the file is renamed away and back between runs, so the two differ in nothing
else, and drift hits both alike. Each run is timed from ``posix_spawn`` to ``wait4``: wall
time, and the child's CPU time (user + system, from ``wait4``'s rusage). The cost is the
median of the paired differences (with minus without) against the median start-up without;
the spread is the 10th to 90th percentile of each side. Where valgrind is installed, the
instructions each start-up executes (callgrind, hash seed fixed: the same count every time)
give the same share without the machine's noise.

What it costs, and why it cannot go much lower: in a venv, ``site`` processes site-packages
twice (once for the venv, once more for its prefixes: CPython 3.11's ``site.venv``), and runs
every import line of every ``.pth`` file each time, compiling it first. Measured on 3.11 in
instructions: the file alone (read twice, a comment line) 0.42 % of ``python -c pass``, a bare
``import os`` line 0.79 %, the boot line 1.25 %; every conditional line tried (``in``, ``not in
... or``, ``.get``, ``posix.environ``, a conditional expression) 1.23 % to 1.47 %.

The target (issue 31): under 1 % of the start-up.

``python benchmarks/trust_runtime.py [--quick] [--json PATH]`` prints the figures (``--quick``:
60 pairs); a ``trust`` group can call ``measure_pth_cost`` itself.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import Figure, emit, figure, parse_args

BOOT_PTH = (
    Path(__file__).resolve().parent.parent / "pytest_startup_guard" / "startup_guard_boot.pth"
)
TARGET = 0.01  # a share of the start-up


def _scratch_venv(folder: Path) -> tuple[Path, Path]:
    """A venv of this interpreter with nothing installed: its python and its site-packages."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    return python, Path(purelib)


def _start_up(python: Path, env: dict[str, str]) -> tuple[float, float]:
    """One ``python -c pass``: (wall seconds, CPU seconds of the child)."""
    started = time.perf_counter()
    pid = os.posix_spawn(str(python), [str(python), "-c", "pass"], env)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"python -c pass failed: status {status}")
    return wall, usage.ru_utime + usage.ru_stime


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _summary(with_line: list[float], without: list[float]) -> dict[str, float]:
    differences = [a - b for a, b in zip(with_line, without, strict=True)]
    base = statistics.median(without)
    cost = statistics.median(differences)
    return {
        "median_with_ms": statistics.median(with_line) * 1000,
        "median_without_ms": base * 1000,
        "p10_with_ms": _percentile(with_line, 0.1) * 1000,
        "p90_with_ms": _percentile(with_line, 0.9) * 1000,
        "p10_without_ms": _percentile(without, 0.1) * 1000,
        "p90_without_ms": _percentile(without, 0.9) * 1000,
        "cost_ms": cost * 1000,  # the median of the paired differences
        "ratio": cost / base,  # the cost as a share of the start-up without the line
    }


def _instructions(python: Path, env: dict[str, str]) -> int | None:
    """Instructions one ``python -c pass`` executes (None without valgrind)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    command = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", str(python)]
    completed = subprocess.run(
        [*command, "-c", "pass"],
        env={**env, "PYTHONHASHSEED": "0"},  # the same dict layouts, the same count each time
        capture_output=True,
        text=True,
        check=True,
    )
    for line in completed.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    return None


def measure_pth_cost(runs: int = 300, pth: Path = BOOT_PTH, seed: int = 31) -> dict[str, Any]:
    """The cost of the ``.pth`` line ``pth`` on ``python -c pass`` with no plan set (see the
    module): ``wall`` and ``cpu``, each with medians and spread in ms and ``ratio``, the cost as
    a share of the start-up; ``instructions`` (with and without, and ``ratio``; None without
    valgrind); ``runs``, ``line``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("STARTUP_GUARD_")}
    with tempfile.TemporaryDirectory(prefix="trust-pth-") as scratch:
        python, purelib = _scratch_venv(Path(scratch) / "venv")
        present, away = purelib / BOOT_PTH.name, purelib / f"{BOOT_PTH.name}.away"
        shutil.copy(pth, away)

        def run(with_line: bool) -> tuple[float, float]:
            if with_line and away.exists():
                away.rename(present)
            elif not with_line and present.exists():
                present.rename(away)
            return _start_up(python, env)

        for _ in range(10):  # warm the file cache and the interpreter's pages
            run(True)
            run(False)
        samples: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        draw = random.Random(seed)
        for _ in range(runs):
            order = [True, False]
            draw.shuffle(order)
            for with_line in order:
                samples[with_line].append(run(with_line))
        run(True)
        counted_with = _instructions(python, env)
        run(False)
        counted_without = _instructions(python, env)
    with_line, without = samples[True], samples[False]
    instructions = None
    if counted_with is not None and counted_without is not None:
        instructions = {
            "with": counted_with,
            "without": counted_without,
            "ratio": (counted_with - counted_without) / counted_without,
        }
    return {
        "runs": runs,
        "line": pth.read_text().strip(),
        "wall": _summary([w for w, _ in with_line], [w for w, _ in without]),
        "cpu": _summary([c for _, c in with_line], [c for _, c in without]),
        "instructions": instructions,
    }


def figures(runs: int) -> list[Figure]:
    measured = measure_pth_cost(runs)
    wall, cpu = measured["wall"], measured["cpu"]
    spread = (
        f"without {wall['median_without_ms']:.2f} ms (p10-p90 {wall['p10_without_ms']:.2f}-"
        f"{wall['p90_without_ms']:.2f}), with {wall['median_with_ms']:.2f} ms (p10-p90"
        f" {wall['p10_with_ms']:.2f}-{wall['p90_with_ms']:.2f}); median of {runs} paired"
        " differences"
    )
    result = [
        figure(
            "trust: .pth line cost on python -c pass, no plan (wall)",
            wall["ratio"] * 100,
            "%",
            target="< 1 %",
            passed=wall["ratio"] < TARGET,
            detail=f"{wall['cost_ms']:.3f} ms; {spread}",
        ),
        figure(
            "trust: .pth line cost on python -c pass, no plan (CPU)",
            cpu["ratio"] * 100,
            "%",
            target="< 1 %",
            passed=cpu["ratio"] < TARGET,
            detail=f"{cpu['cost_ms']:.3f} ms of {cpu['median_without_ms']:.2f} ms CPU",
        ),
    ]
    counted = measured["instructions"]
    if counted is not None:
        result.append(
            figure(
                "trust: .pth line cost on python -c pass, no plan (instructions)",
                counted["ratio"] * 100,
                "%",
                target="< 1 %",
                passed=counted["ratio"] < TARGET,
                detail=f"{counted['with'] - counted['without']} of {counted['without']}"
                " instructions (callgrind)",
            )
        )
    return result


def main() -> None:
    args = parse_args(__doc__ or "")
    emit(figures(60 if args.quick else 300), args)


if __name__ == "__main__":
    main()
