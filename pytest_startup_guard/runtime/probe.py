"""``startup-guard-probe``: shows whether the child runtime reached a process, and exercises it.

    startup-guard-probe                      print this process's identity under the plan (JSON)
    startup-guard-probe --loop REF POINTER RESTORE N [--via spawn] --out FILE
                                             N times: open REF, check POINTER exists, open
                                             RESTORE, check again; from a process started --via
                                             direct, spawn, forkserver, fork, grandchild or
                                             isolated (python -I); results go to FILE as JSON
    startup-guard-probe --hang deadlock|gil  print "hanging <pid>" and never return

Run it with a plan in the environment (the ``child_runtime`` fixture's ``env``) to check that
a console script, and the processes it starts, are under test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from pytest_startup_guard.runtime import child as childruntime

VIAS = ("direct", "spawn", "forkserver", "fork", "grandchild", "isolated")


def pointer_loop(ref: str, pointer: str, restore: str, iterations: int) -> list[list[bool]]:
    """What a reader sees: does the pointer exist after opening REF, and after opening RESTORE?"""
    seen = []
    for _ in range(iterations):
        with open(ref) as handle:
            handle.read()
        after_ref = os.path.exists(pointer)  # not audited: only the open before it triggers
        with open(restore) as handle:
            handle.read()
        after_restore = os.path.exists(pointer)
        seen.append([after_ref, after_restore])
    return seen


def _write_result(out: str, seen: list[list[bool]]) -> None:
    """Whole or not at all, through a file created exclusively next to ``out`` (a predictable
    ``out.tmp`` could be a planted symlink)."""
    result: dict[str, Any] = {"identity": childruntime.identity(), "seen": seen}
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(out)))
    try:
        with os.fdopen(descriptor, "w") as handle:
            json.dump(result, handle)
        os.replace(temporary, out)
    except BaseException:
        os.unlink(temporary)
        raise


def _run_loop(ref: str, pointer: str, restore: str, iterations: int, out: str) -> None:
    _write_result(out, pointer_loop(ref, pointer, restore, iterations))


def _hang(kind: str) -> None:
    print(f"hanging {os.getpid()}", flush=True)
    if kind == "deadlock":
        first, second = threading.Lock(), threading.Lock()

        def take(a: Any, b: Any) -> None:
            with a:
                time.sleep(0.2)
                with b:
                    pass

        threads = [
            threading.Thread(target=take, args=(first, second), name="takes-first"),
            threading.Thread(target=take, args=(second, first), name="takes-second"),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        # A loop in C that never lets go of the GIL.
        sum(itertools.repeat(1, 10**14))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="startup-guard-probe", description=__doc__)
    parser.add_argument("--loop", nargs=4, metavar=("REF", "POINTER", "RESTORE", "N"))
    parser.add_argument("--via", choices=VIAS, default="direct")
    parser.add_argument("--out")
    parser.add_argument("--hang", choices=("deadlock", "gil"))
    args = parser.parse_args(argv)
    if args.hang:
        _hang(args.hang)
        return 0
    if not args.loop:
        print(json.dumps(childruntime.identity()))
        return 0
    if not args.out:
        parser.error("--loop needs --out FILE")
    ref, pointer, restore, count = args.loop
    loop_args = (ref, pointer, restore, int(count), args.out)
    if args.via == "direct":
        _run_loop(*loop_args)
    elif args.via in ("spawn", "forkserver", "fork"):
        context = multiprocessing.get_context(args.via)
        child = context.Process(target=_run_loop, args=loop_args)
        child.start()
        child.join()
        return child.exitcode or 0
    else:
        python = [sys.executable, "-I"] if args.via == "isolated" else [sys.executable]
        command = [
            *python,
            "-m",
            "pytest_startup_guard.runtime.probe",
            "--loop",
            *args.loop,
            "--out",
            args.out,
        ]
        return subprocess.run(command, check=False).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
