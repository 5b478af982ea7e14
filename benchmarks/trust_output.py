"""What ``ready.log`` costs pytest when members print a lot: ``measure_ready_log``.

Real members, launched through the plugin in a pytest run of their own (``-p startup_guard``,
plugin autoloading off): each prints ``megabytes`` MB of log lines, then its readiness line,
then waits. The inner test launches them with ``ready.log(pattern)`` and measures its own
process (pytest's, where the members are watched) around the launch: CPU seconds (user and
system, every thread) and peak memory above what the process held before the launch (the high
water mark of its resident set, ``ru_maxrss``, against the resident set just before). The
target (issue 31): under 1 s of CPU and under 50 MB of extra memory for 2 x 100 MB.

``python benchmarks/trust_output.py [--quick] [--json PATH]`` prints the figures (``--quick``:
2 x 10 MB); a ``trust`` group can call ``measure_ready_log`` itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import Figure, emit, figure, parse_args

# The default readiness line and pattern: uvicorn's, as a vLLM or TGI server prints it.
READY_LINE = "INFO:     Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)"
PATTERN = r"Uvicorn running on http://"

SERVER = r"""
import sys, time
line = b"INFO loading weights: shard 17 of 64, 12.5 MB/s, eta 00:00:03 ..........................\n"
block = line * (1024 * 1024 // len(line))
for _ in range(int(sys.argv[1])):
    sys.stdout.buffer.write(block)
sys.stdout.buffer.write(sys.argv[2].encode() + b"\n")
sys.stdout.flush()
time.sleep(120)
"""

INNER_TEST = r"""
import json, os, resource, sys, time
import psutil
from pytest_startup_guard import ready

def test_ready_log_cost(server_fleet):
    config = json.loads(os.environ["TRUST_OUTPUT_CONFIG"])
    rss_before = psutil.Process().memory_info().rss
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    fleet = server_fleet.launch(
        [sys.executable, "server.py", str(config["megabytes"]), config["ready_line"]],
        count=config["members"], timeout=300, ready=ready.log(config["pattern"]),
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    printed = sum(server.output_path.stat().st_size for server in fleet.servers)
    fleet.stop()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    peak = after.ru_maxrss * 1024  # KiB on Linux
    with open(config["result"], "w") as out:
        json.dump({
            "ready": sum(server.ready for server in fleet.servers),
            "cpu_seconds": round(cpu, 3),
            "extra_peak_mb": round(max(0, peak - rss_before) / 2**20, 1),
            "wall_seconds": round(wall, 3),
            "printed_mb": round(printed / 2**20, 1),
        }, out)
"""


def measure_ready_log(
    megabytes: int = 100, members: int = 2, pattern: str = PATTERN
) -> dict[str, Any]:
    """Launch ``members`` members through the plugin, each printing ``megabytes`` MB before
    its readiness line, watched with ``ready.log(pattern)``. Returns ``cpu_seconds`` and
    ``extra_peak_mb`` of the pytest process over the launch, with ``ready`` (members found
    ready), ``wall_seconds`` (of the launch) and ``printed_mb`` (all members' output)."""
    with tempfile.TemporaryDirectory(prefix="trust-output-") as folder:
        root = Path(folder)
        (root / "server.py").write_text(SERVER)
        (root / "test_ready_log_cost.py").write_text(INNER_TEST)
        result = root / "result.json"
        config = {
            "megabytes": megabytes,
            "members": members,
            "pattern": pattern,
            "ready_line": READY_LINE,
            "result": str(result),
        }
        env = {
            **os.environ,
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "TRUST_OUTPUT_CONFIG": json.dumps(config),
        }
        for name in ("PYTEST_ADDOPTS", "STARTUP_GUARD_REPORT", "STARTUP_GUARD_HTML"):
            env.pop(name, None)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "startup_guard", "-q", "-p", "no:cacheprovider"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not result.exists():
            raise RuntimeError(f"the inner pytest run failed:\n{done.stdout}\n{done.stderr}")
        measured: dict[str, Any] = json.loads(result.read_text())
    return {"megabytes": megabytes, "members": members, "pattern": pattern, **measured}


def figures(quick: bool) -> list[Figure]:
    megabytes = 10 if quick else 100
    measured = measure_ready_log(megabytes=megabytes, members=2)
    detail = (
        f"2 members x {megabytes} MB of output, ready.log({PATTERN!r});"
        f" {measured['ready']} of 2 ready in {measured['wall_seconds']} s"
    )
    return [
        figure(
            f"trust: ready.log CPU of pytest, 2 x {megabytes} MB of output",
            measured["cpu_seconds"],
            "s",
            target="< 1 s",
            passed=measured["ready"] == 2 and measured["cpu_seconds"] < 1.0,
            detail=detail,
        ),
        figure(
            f"trust: ready.log extra peak memory of pytest, 2 x {megabytes} MB of output",
            measured["extra_peak_mb"],
            "MB",
            target="< 50 MB",
            passed=measured["ready"] == 2 and measured["extra_peak_mb"] < 50.0,
            detail=detail,
        ),
    ]


if __name__ == "__main__":
    arguments = parse_args(__doc__ or "")
    emit(figures(arguments.quick), arguments)
