"""Idle cost: what the plugin costs a suite that uses none of it, and what importing it costs.

- a suite of 2,000 trivial tests run with ``-p startup_guard`` against ``-p no:startup_guard``
  (plugin autoloading off for both, so nothing else differs), interleaved runs, medians;
- the plugin's import time in a fresh interpreter (``import pytest_startup_guard.plugin`` after
  ``import pytest``), against importing pytest alone.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import emit, figure, parse_args


def suite(folder: Path, tests: int) -> None:
    lines = ["import pytest", ""]
    lines += [f"def test_{n}():\n    assert {n} + 1 == {n + 1}\n" for n in range(tests)]
    (folder / "test_trivial.py").write_text("\n".join(lines))


def run(folder: Path, plugin: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STARTUP_GUARD_", "PYTEST_"))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", plugin, "-p", "no:cacheprovider", str(folder)],
        cwd=folder,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


PLUGIN_IMPORT = """
import time, pytest
start = time.perf_counter()
import pytest_startup_guard.plugin
print(time.perf_counter() - start)
"""


def plugin_import_seconds() -> float:
    """Best of 5 fresh interpreters: the plugin's own import, timed inside, after pytest's."""
    samples = []
    for _ in range(5):
        output = subprocess.run(
            [sys.executable, "-c", PLUGIN_IMPORT], capture_output=True, text=True, check=True
        )
        samples.append(float(output.stdout))
    return min(samples)


def main() -> None:
    args = parse_args(__doc__ or "")
    tests = 200 if args.quick else 2000
    repeats = 1 if args.quick else 7
    folder = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    try:
        suite(folder, tests)
        with_plugin, without = [], []
        run(folder, "startup_guard")  # warm the file cache
        for _ in range(repeats):
            with_plugin.append(run(folder, "startup_guard"))
            without.append(run(folder, "no:startup_guard"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratio = statistics.median(with_plugin) / statistics.median(without)
    plugin_import = plugin_import_seconds()
    emit(
        [
            figure(
                f"idle: {tests} trivial tests, -p startup_guard / -p no:startup_guard",
                ratio,
                "x",
                target="<= 1.03",
                passed=ratio <= 1.03,
                detail=f"medians of {repeats} interleaved runs: {statistics.median(with_plugin):.2f} s against {statistics.median(without):.2f} s",
            ),
            figure(
                "idle: plugin import time (after pytest)",
                1000 * plugin_import,
                "ms",
                detail="best of 5 fresh interpreters; it loads the standard library and pytest only",
            ),
        ],
        args,
    )


if __name__ == "__main__":
    sys.exit(main())
