"""A small real API server that loads a compiled kernel from a shared compile cache at start-up.

    python cache_server.py --cache DIR --port 8000 [--kernel NAME] [--policy naive|retry]

Serving stacks keep compiled kernels and graphs in a folder every server process shares
(Triton's ``~/.triton/cache``, torch inductor's cache, vLLM's ``torch_compile_cache``). This
server reads ``DIR/kernels/NAME.json`` (a JSON entry with a ``"kernel"`` key) at start-up and
serves ``GET /health`` once it has it. The generic races put that file or its folder under
race; what the server does when the read fails is the policy:

- ``naive``: nothing: it dies (a file replaced, rewritten, half written or a folder moved
  aside kills it);
- ``retry``: a bounded, jittered retry of the read that re-raises at the end, so a truly broken
  entry still fails the start-up, naming the file.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from config_server import serve, with_retry


def read_kernel(cache: Path, kernel: str) -> dict[str, Any]:
    path = cache / "kernels" / f"{kernel}.json"
    with open(path) as handle:
        entry = json.load(handle)
    if not isinstance(entry, dict) or "kernel" not in entry:
        raise ValueError(f"{path}: the cache entry has no 'kernel'")
    return entry


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--kernel", default="matmul")
    parser.add_argument("--policy", choices=("naive", "retry"), default="naive")
    args = parser.parse_args()
    try:
        if args.policy == "retry":
            entry = with_retry(
                lambda: read_kernel(args.cache, args.kernel), f"loading kernel {args.kernel}"
            )
        else:
            entry = read_kernel(args.cache, args.kernel)
    except Exception:
        traceback.print_exc()
        print(
            f"server failed to start: could not load kernel {args.kernel} from {args.cache}",
            file=sys.stderr,
        )
        return 1
    serve({"model_type": f"kernel {entry['kernel']}", **entry}, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
