"""Fake cache: building a 1,000-file repo, and a per-test copy of it against building it anew."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import Figure, emit, figure, median_seconds, parse_args

from pytest_startup_guard import FakeHubCache


def repo_files(count: int, payload_bytes: int) -> dict[str, object]:
    files: dict[str, object] = {"config.json": {"model_type": "gpt2", "n_layer": 2}}
    for index in range(count - 1):
        files[f"shards/{index // 100:02d}/part-{index:04d}.json"] = {
            "index": index,
            "data": "x" * payload_bytes,
        }
    return files


def measure(base: Path, label: str, count: int, payload: int, repeats: int) -> list[Figure]:
    files = repo_files(count, payload)
    original = FakeHubCache(base / f"shared-{payload}", shared=True).add_model("acme/big", files)
    fresh = (base / f"{payload}-{n}" for n in itertools.count())
    build = median_seconds(lambda: FakeHubCache(next(fresh)).add_model("acme/big", files), repeats)
    copy = median_seconds(lambda: FakeHubCache(next(fresh)).copy_of(original), repeats)
    return [
        figure(f"cache: build a {count}-file repo ({label})", build * 1000, "ms"),
        figure(f"cache: per-test copy of it ({label})", copy * 1000, "ms"),
        figure(
            f"cache: copy speed-up over building ({label})",
            build / copy,
            "x",
            target=">= 10x",
            passed=build / copy >= 10,
            detail="median build time / median copy time, same run",
        ),
    ]


SHARED_SUITE = """
import os, pytest

@pytest.mark.parametrize("n", range(16))
def test_reads_shared(shared_hub_cache, n):
    repo = shared_hub_cache.add_model("acme/shared", {"config.json": {"model_type": "gpt2"}, "w.safetensors": b"0" * 65536})
    with open(os.environ["ROOTS"], "a") as out:
        out.write(f"{shared_hub_cache.root}\\n")
"""


def shared_built_once(base: Path, workers: int) -> Figure:
    """Run 16 tests on ``workers`` xdist workers; count how often the shared repo was built."""
    suite = base / "shared-suite"
    suite.mkdir()
    (suite / "test_shared.py").write_text(SHARED_SUITE)
    roots = suite / "roots.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STARTUP_GUARD_", "PYTEST_"))}
    env["ROOTS"] = str(roots)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "startup_guard", "-p", "xdist", "-n", str(workers),
         "-p", "no:cacheprovider", f"--basetemp={suite / 'tmp'}", str(suite)],
        cwd=suite, env={**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    (root,) = set(roots.read_text().split())
    builds = len(FakeHubCache(root, shared=True).builds())
    return figure(
        f"cache: shared_hub_cache builds under -n {workers}",
        builds,
        "builds",
        target="1",
        passed=builds == 1,
        detail="16 tests on every worker add the same repo at once",
    )


def main() -> None:
    args = parse_args(__doc__ or "")
    count = 200 if args.quick else 1000
    repeats = 1 if args.quick else 7
    base = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    try:
        figures = measure(base, "64 B files", count, 64, repeats)
        figures += measure(base, "16 KiB files", count, 16 * 1024, repeats)
        figures.append(shared_built_once(base, 2 if args.quick else 4))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
