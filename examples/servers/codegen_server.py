"""A small real API server that generates C++ sources into a workspace its peers share, then
"compiles" them, at start-up.

    python codegen_server.py --workspace DIR --port 8000 [--policy naive|atomic]

Serving stacks JIT-generate kernel sources at start-up (FlashInfer's ``FLASHINFER_WORKSPACE_BASE``
shared by every rank: NVIDIA/TensorRT-LLM#18897). This server makes sure ``DIR/generated.h``
defines ``struct SfLayout`` once, then checks every struct is defined once (a compiler's
"redefinition" error otherwise), then serves ``GET /health``:

- ``naive``: reads the header and, if the definition is missing, appends it: two servers that
  both read before either appends both append it (a duplicate definition);
- ``atomic``: writes the whole header to a private temporary file and moves it into place
  (``os.replace``): whatever the order, the header is whole and defines it once.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from config_server import serve

DEFINITION = "struct SfLayout { int rows; int cols; };\n"


def generate(header: Path, policy: str) -> None:
    try:
        text = header.read_text()
    except FileNotFoundError:
        text = ""
    if "struct SfLayout" in text:
        return
    if policy == "naive":
        with open(header, "a") as handle:
            handle.write(DEFINITION)
    else:
        temporary = header.with_name(f"{header.name}.tmp.{os.getpid()}")
        temporary.write_text(DEFINITION)
        os.replace(temporary, header)


def compile_header(header: Path) -> None:
    names = re.findall(r"struct (\w+)", header.read_text())
    for name in set(names):
        if names.count(name) > 1:
            raise SyntaxError(f"{header}: redefinition of 'struct {name}'")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--policy", choices=("naive", "atomic"), default="naive")
    args = parser.parse_args()
    header = args.workspace / "generated.h"
    try:
        generate(header, args.policy)
        compile_header(header)
    except (OSError, SyntaxError) as error:
        print(f"server failed to start: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    serve({"model_type": "codegen", "header": str(header)}, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
