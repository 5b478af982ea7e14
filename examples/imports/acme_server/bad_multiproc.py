"""BAD: the start-method code of incident 2.

- ``set_start_method`` is called unguarded: where a launcher, a library or a test runner has
  already set a start method, start-up dies with ``RuntimeError: context has already been set``;
- ``ACME_START_METHOD`` is documented as ``spawn`` or ``fork`` (default ``spawn``), but the code
  still accepts ``forkserver`` silently, and an unknown value dies deep in ``multiprocessing``
  (``ValueError: cannot find context for 'x'``) without naming the variable.
"""

from __future__ import annotations

import multiprocessing
import os

START_METHOD_ENV = "ACME_START_METHOD"  # documented values: spawn, fork


def _child() -> None:
    pass


def main() -> None:
    multiprocessing.set_start_method(os.environ.get(START_METHOD_ENV, "spawn"))
    worker = multiprocessing.Process(target=_child)
    worker.start()
    worker.join()
    if worker.exitcode != 0:
        raise SystemExit(f"worker failed with exit code {worker.exitcode}")
    print("ready")


if __name__ == "__main__":
    main()
