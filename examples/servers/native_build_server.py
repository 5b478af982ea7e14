"""A small real API server that builds its kernel with a native build tool at start-up.

    python native_build_server.py --port 8000 --build DIR --tool PROGRAM [--policy naive|retry]

Serving stacks that JIT-compile their kernels (FlashInfer, torch cpp extensions) run ninja in a
build folder several server processes share; ninja opens ``.ninja_log`` there before it builds
anything. When another build removed or moved that folder for a moment, the open fails in
ninja's C++ code: ``ninja: error: opening build log: No such file or directory``, and the
server fails to start (flashinfer-ai/flashinfer#2338). This server runs ``PROGRAM DIR`` (the
bundled ``native_build.c``, compiled by the test) and serves ``GET /health`` once it built:

- ``naive``: the build tool tries once: a folder moved aside kills the build, and the server;
- ``retry``: the build tool retries the log's open (bounded, 0.1 s doubling), so a folder that
  comes back is used, and a build that keeps failing still fails the start-up.

The file call that fails is made in C: only a fleet launched with ``native_accesses=True``
sees it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from config_server import serve


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--build", type=Path, required=True)
    parser.add_argument("--tool", type=Path, required=True)
    parser.add_argument("--policy", choices=("naive", "retry"), default="naive")
    args = parser.parse_args()
    command = [str(args.tool), str(args.build)]
    if args.policy == "retry":
        command.append("--retry")
    build = subprocess.run(command, check=False)
    if build.returncode != 0:
        print(
            f"server failed to start: building the kernel in {args.build} failed"
            f" (exit status {build.returncode})",
            file=sys.stderr,
        )
        return 1
    serve({"model_type": "kernel matmul", "built_in": str(args.build)}, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
