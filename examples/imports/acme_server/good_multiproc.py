"""GOOD: the start method comes from a checked variable and a private context.

- ``multiprocessing.get_context(method)`` instead of ``set_start_method``: no global state, so
  nothing to collide with whatever was set before;
- ``ACME_START_METHOD`` is checked against the documented values, and a wrong value stops
  start-up with a message that names the variable, the value and what is accepted.
"""

from __future__ import annotations

import multiprocessing
import os

START_METHOD_ENV = "ACME_START_METHOD"
START_METHODS = ("spawn", "fork")  # the documented values; the first is the default


def start_method() -> str:
    value = os.environ.get(START_METHOD_ENV, START_METHODS[0])
    if value not in START_METHODS:
        raise SystemExit(
            f"invalid {START_METHOD_ENV} {value!r}: expected one of {', '.join(START_METHODS)}"
        )
    return value


def _child() -> None:
    pass


def main() -> None:
    context = multiprocessing.get_context(start_method())
    worker = context.Process(target=_child)
    worker.start()
    worker.join()
    if worker.exitcode != 0:
        raise SystemExit(f"worker failed with exit code {worker.exitcode}")
    print("ready")


if __name__ == "__main__":
    main()
