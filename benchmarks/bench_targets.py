"""Targets: how long cpu/cuda/rocm detection takes, and that it imports nothing heavy."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import Figure, emit, figure, median_seconds, parse_args

from pytest_startup_guard.targets.detection import detect_target

LIMIT_MS = 5.0

# Run in a fresh interpreter: what the first detection of a pytest run costs, and what it loads.
FRESH = """
import json, sys, time
before = set(sys.modules)
start = time.perf_counter()
from pytest_startup_guard.targets.detection import detect_target
imported = time.perf_counter()
detect_target()
detected = time.perf_counter()
loaded = {name.split(".")[0] for name in set(sys.modules) - before}
print(json.dumps({
    "import": imported - start,
    "first_call": detected - imported,
    "outside_stdlib": sorted(loaded - set(sys.stdlib_module_names) - {"pytest_startup_guard"}),
}))
"""


def busy_machine(base: Path, folders: int) -> tuple[str, dict[str, str]]:
    """A fake machine showing every signal, its programs at the end of a long PATH."""
    root = base / "machine"
    for file in (
        "dev/kfd",
        "dev/nvidiactl",
        "proc/driver/nvidia/version",
        "opt/rocm/.info/version",
    ):
        (root / file).parent.mkdir(parents=True, exist_ok=True)
        (root / file).write_text("")
    path = [base / f"bin{index:02d}" for index in range(folders)]
    for folder in path:
        folder.mkdir()
    for program in ("rocminfo", "rocm-smi", "nvidia-smi"):
        (path[-1] / program).write_text("#!/bin/sh\n")
        (path[-1] / program).chmod(0o755)
    environ = {
        "PATH": ":".join(str(folder) for folder in path),
        "HIP_VISIBLE_DEVICES": "0",
        "ROCR_VISIBLE_DEVICES": "0",
    }
    return str(root), environ


def fresh_interpreter(runs: int) -> list[Figure]:
    samples = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", FRESH], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(runs)
    ]
    first_call = statistics.median(sample["first_call"] for sample in samples) * 1000
    imported = statistics.median(sample["import"] for sample in samples) * 1000
    outside = sorted({name for sample in samples for name in sample["outside_stdlib"]})
    return [
        figure(
            "targets: first detect_target() in a fresh interpreter",
            first_call,
            "ms",
            target=f"< {LIMIT_MS:g} ms",
            passed=first_call < LIMIT_MS,
            detail=f"median of {runs} interpreters",
        ),
        figure(
            "targets: importing pytest_startup_guard.targets.detection (fresh)",
            imported,
            "ms",
            detail=f"median of {runs} interpreters; stdlib only (typing, dataclasses, shutil),"
            " all of it loaded by pytest anyway",
        ),
        figure(
            "targets: modules outside the stdlib loaded by detection",
            len(outside),
            "modules",
            target="0",
            passed=not outside,
            detail=", ".join(outside) or "none (torch, pytest: not imported)",
        ),
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    repeats = 20 if args.quick else 500
    base = Path(tempfile.mkdtemp(prefix="bench-targets-"))
    try:
        here = median_seconds(detect_target, repeats) * 1000
        root, environ = busy_machine(base, folders=40)
        busy = median_seconds(lambda: detect_target(root, environ, modules={}), repeats) * 1000
        assert detect_target(root, environ, modules={}).ambiguous  # every signal really seen
    finally:
        shutil.rmtree(base, ignore_errors=True)
    figures = [
        figure(
            "targets: detect_target() on this machine",
            here,
            "ms",
            target=f"< {LIMIT_MS:g} ms",
            passed=here < LIMIT_MS,
            detail=f"median of {repeats} calls",
        ),
        figure(
            "targets: detect_target(), every signal, 40-folder PATH",
            busy,
            "ms",
            target=f"< {LIMIT_MS:g} ms",
            passed=busy < LIMIT_MS,
            detail=f"median of {repeats} calls on a fake machine",
        ),
    ]
    figures += fresh_interpreter(3 if args.quick else 15)
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
