"""Child runtime: idle start-up cost, audit-hook cost per open, barrier release spread."""

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

from harness import Figure, emit, figure, parse_args

import pytest_startup_guard
from pytest_startup_guard.runtime.controller import RuntimeController

PACKAGE_ROOT = Path(pytest_startup_guard.__file__).resolve().parent
BOOT_PTH = PACKAGE_ROOT / "startup_guard_boot.pth"


def bare_venv(folder: Path) -> Path:
    """A venv of the same interpreter with nothing installed: the baseline."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True)
    return folder / "bin" / "python"


def site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(
        subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
    )


def startup_seconds(python: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


def idle_startup(base: Path, runs: int) -> list[Figure]:
    without = bare_venv(base / "without")
    with_package = bare_venv(base / "with")
    purelib = site_packages(with_package)
    # What `pip install pytest-startup-guard` adds: the package and its .pth line.
    shutil.copytree(
        PACKAGE_ROOT, purelib / PACKAGE_ROOT.name, ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(BOOT_PTH, purelib / BOOT_PTH.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STARTUP_GUARD_")}
    samples: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(3):  # warm the file cache
        startup_seconds(without, env)
        startup_seconds(with_package, env)
    shuffle = random.Random(runs).shuffle
    for _ in range(runs):  # interleaved in a seeded random order: drift and order hit both alike
        order = [("without", without), ("with", with_package)]
        shuffle(order)
        for name, python in order:
            samples[name].append(startup_seconds(python, env))
    bare, idle = statistics.median(samples["without"]), statistics.median(samples["with"])
    return [
        figure("child runtime: python start-up, no plan, package installed", idle * 1000, "ms"),
        figure("child runtime: python start-up, bare venv", bare * 1000, "ms"),
        figure(
            "child runtime: idle start-up ratio (installed / bare)",
            idle / bare,
            "x",
            target="<= 1.02",
            passed=idle / bare <= 1.02,
            detail=f"median of {runs} interleaved runs each; difference {1000 * (idle - bare):.2f} ms",
        ),
    ]


HOOK_COST = """
import os, sys, time
from pytest_startup_guard.runtime import child as childruntime
path = sys.argv[1]
hooked = sys.argv[2] == "1"
if hooked:
    childruntime.activate_in_process(("/no/such/watched/folder/",), lambda op, p: None)
n = int(sys.argv[3])
best = float("inf")
for _ in range(5):
    start = time.perf_counter()
    for _ in range(n):
        open(path, "rb").close()
    best = min(best, (time.perf_counter() - start) / n)
print(best)
"""


def hook_cost(base: Path, opens: int) -> list[Figure]:
    target = base / "file.txt"
    target.write_text("x")

    def per_open(hooked: bool) -> float:
        output = subprocess.run(
            [sys.executable, "-c", HOOK_COST, str(target), "1" if hooked else "0", str(opens)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return float(output)

    plain = statistics.median(per_open(False) for _ in range(3))
    hooked = statistics.median(per_open(True) for _ in range(3))
    cost = (hooked - plain) * 1e6
    return [
        figure("child runtime: open() without the audit hook", plain * 1e6, "us"),
        figure(
            "child runtime: audit-hook cost per open, nothing matches",
            cost,
            "us",
            target="< 2 us",
            passed=cost < 2,
            detail="best-of-5 loop time, median of 3 processes each",
        ),
    ]


def barrier_spread(members: int, repeats: int) -> list[Figure]:
    spreads = []
    with RuntimeController() as controller:
        for _ in range(repeats):
            group = controller.barrier(members)
            processes = [
                subprocess.Popen(
                    [sys.executable, "-c", "pass"],
                    env={**os.environ, **controller.env, **group.member_env(index)},
                )
                for index in range(members)
            ]
            group.wait_for_arrivals(time.monotonic() + 30)
            time.sleep(0.05)  # let the machine settle: measure the release, not the start-up
            group.release()
            for process in processes:
                process.wait()
            deadline = time.monotonic() + 5
            records = [controller.processes.get(p.pid) for p in processes]
            while (
                any(r is None or r.released_t is None for r in records)
                and time.monotonic() < deadline
            ):
                time.sleep(0.01)
                records = [controller.processes.get(p.pid) for p in processes]
            released = [r.released_t for r in records if r is not None and r.released_t is not None]
            spreads.append(max(released) - min(released))
    spread = statistics.median(spreads) * 1000
    return [
        figure(
            f"child runtime: barrier release spread, {members} processes",
            spread,
            "ms",
            target="< 5 ms",
            passed=spread < 5,
            detail=f"median of {repeats} releases; first to last child to leave the barrier",
        )
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    base = Path(tempfile.mkdtemp(prefix="bench-child-"))
    try:
        figures = idle_startup(base, runs=6 if args.quick else 150)
        figures += hook_cost(base, opens=2000 if args.quick else 50000)
        figures += barrier_spread(8, repeats=1 if args.quick else 7)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
