"""Run every benchmark, write benchmarks/results.json with the machine's description, print a table.

python benchmarks/run.py            # full sizes (make bench)
python benchmarks/run.py --quick    # smoke run of every benchmark (make test does this)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def machine() -> dict[str, object]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f"{pages / 2**30:.1f} GiB"
    except (ValueError, OSError):
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--out", default=None, help="results file (default benchmarks/results.json)"
    )
    parser.add_argument(
        "--only", default=None, help="run only bench_<ONLY>.py; its figures replace its old ones"
    )
    args = parser.parse_args()
    out = (
        Path(args.out)
        if args.out
        else HERE / ("results.quick.json" if args.quick else "results.json")
    )
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.only:
        scripts = [s for s in scripts if s.stem == f"bench_{args.only}"]
    results: list[dict[str, object]] = []
    failures = []
    for script in scripts:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
            figures_file = handle.name
        command = [sys.executable, str(script), "--json", figures_file] + (
            ["--quick"] if args.quick else []
        )
        started = time.perf_counter()
        print(f"== {script.name}", flush=True)
        completed = subprocess.run(command, cwd=HERE, check=False)
        elapsed = time.perf_counter() - started
        if completed.returncode != 0:
            failures.append(script.name)
            continue
        figures = json.loads(Path(figures_file).read_text())
        os.unlink(figures_file)
        for item in figures:
            item["benchmark"] = script.stem
        results.extend(figures)
        print(f"   ({elapsed:.1f} s)", flush=True)
    if args.only and out.exists():  # refresh one benchmark's figures, keep the others'
        previous = json.loads(out.read_text())["figures"]
        results = [f for f in previous if f["benchmark"] != f"bench_{args.only}"] + results
        results.sort(key=lambda item: str(item["benchmark"]))
    out.write_text(
        json.dumps({"machine": machine(), "quick": args.quick, "figures": results}, indent=2) + "\n"
    )
    print()
    print(f"{'figure':<60} {'value':>12} {'unit':<8} {'target':<12} result")
    for item in results:
        status = "" if item["passed"] is None else ("pass" if item["passed"] else "FAIL")
        print(
            f"{item['figure']:<60} {item['value']:>12.4g} {item['unit']:<8} {item['target'] or '':<12} {status}"
        )
    print(f"\nwritten to {out}")
    if failures:
        print(f"benchmark scripts that failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
