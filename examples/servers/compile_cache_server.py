"""A small real API server that loads a compiled artifact from a compile cache at start-up.

    python compile_cache_server.py --cache DIR --port 8000 [--kernel NAME] [--policy POLICY]

Serving stacks keep what they compiled (vLLM's ``torch_compile_cache``, inductor's FX graphs,
Triton kernels) in a cache folder and load it at the next start instead of compiling again.
This server keeps one artifact, ``DIR/NAME.artifact``: a JSON object with the compiled code and
the SHA-256 of that code. On a cache miss it compiles (a few milliseconds here) and writes the
entry to a temporary name in ``DIR``, then ``os.replace``s it into place, so no reader ever
sees half of it. ``GET /health`` answers once it has the artifact; ``GET /config`` shows its
kernel and checksum.

A crash, a full disk or a killed process can still leave a bad entry (vllm-project/vllm#35061:
a 0-byte compile-cache file, loaded on every restart). What the server does on one is the
policy:

- ``crash``: loads it anyway and dies of what the loader raises (vLLM before the fix);
- ``refuse``: exits 1 naming the file and how to remove it (fails closed: right for a model's
  config, wrong for a cache, which the server can rebuild: every restart fails again until
  someone deletes the file);
- ``ignore``: compiles in memory and serves, leaving the bad entry in place (the next start
  meets it again);
- ``rebuild``: discards the entry, compiles again, writes the new one (``mkstemp`` +
  ``os.replace``) and serves: right.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FORMAT = "compiled-artifact/1"
COMPILE_SECONDS = 0.02  # what "compiling" takes: short, so a test stays fast


class CorruptArtifact(ValueError):
    """A cache entry that is not a whole artifact of this kernel."""


def compile_kernel(kernel: str) -> dict[str, Any]:
    """Compile ``kernel`` (a stand-in): the same code every time, as a real compiler gives."""
    time.sleep(COMPILE_SECONDS)
    code = "".join(f"{kernel}: block {block} -> fma x{block % 8}\n" for block in range(64))
    return {
        "format": FORMAT,
        "kernel": kernel,
        "code": code,
        "sha256": hashlib.sha256(code.encode()).hexdigest(),
    }


def artifact_bytes(artifact: dict[str, Any]) -> bytes:
    return (json.dumps(artifact, sort_keys=True) + "\n").encode()


def parse(data: bytes, kernel: str) -> dict[str, Any]:
    """The artifact in ``data``; any way it is not whole raises what a loader raises."""
    artifact = json.loads(data)  # JSONDecodeError, UnicodeDecodeError
    if not isinstance(artifact, dict) or artifact.get("format") != FORMAT:
        raise CorruptArtifact(f"not a {FORMAT} object")
    if artifact.get("kernel") != kernel:
        raise CorruptArtifact(f"compiled for {artifact.get('kernel')!r}, not {kernel!r}")
    code = artifact.get("code")
    if not isinstance(code, str) or hashlib.sha256(code.encode()).hexdigest() != artifact.get(
        "sha256"
    ):
        raise CorruptArtifact("its checksum does not match its code")
    return artifact


def is_whole(data: bytes, kernel: str = "matmul") -> bool:
    """Whether ``data`` is a whole artifact of ``kernel`` (for a test's ``whole=``)."""
    try:
        parse(data, kernel)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError and CorruptArtifact are ValueErrors
        return False
    return True


def write_entry(path: Path, artifact: dict[str, Any]) -> None:
    """Write to a temporary name beside the entry, then move it into place in one step."""
    descriptor, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(artifact_bytes(artifact))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def load(path: Path, kernel: str, policy: str) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:  # a cache miss: compile and fill the cache
        artifact = compile_kernel(kernel)
        write_entry(path, artifact)
        return artifact
    if policy == "crash":
        return parse(data, kernel)  # the bug: whatever the loader raises kills the start-up
    try:
        return parse(data, kernel)
    except ValueError as error:
        problem = f"{type(error).__name__}: {error}"
    if policy == "refuse":
        print(
            f"server failed to start: the compile cache entry {path} is corrupt ({problem});"
            " remove it and start again",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1)
    print(f"corrupt compile cache entry {path} ({problem}): compiling again", flush=True)
    artifact = compile_kernel(kernel)
    if policy == "rebuild":
        write_entry(path, artifact)  # replaces the bad entry: the next start loads this one
    return artifact  # ignore: the bad entry stays, and the next start meets it again


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--kernel", default="matmul")
    parser.add_argument(
        "--policy", choices=("crash", "refuse", "ignore", "rebuild"), default="rebuild"
    )
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    artifact = load(args.cache / f"{args.kernel}.artifact", args.kernel, args.policy)
    from config_server import serve  # here: importing this module for is_whole needs no server

    serve({"model_type": f"kernel {artifact['kernel']}", "sha256": artifact["sha256"]}, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
