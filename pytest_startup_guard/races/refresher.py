"""The chaos refresher: a process that runs one race in a loop, as a real cache refresher does.

Started by ``hub_race.arm(..., trigger=chaos(...))`` as ``python -m pytest_startup_guard.races.refresher``
with a pickled spec on stdin. It opens and closes the race's window with seeded jitter, logs each
window (monotonic open and close times) to a file, and stops — leaving the cache whole — when
the test side writes a byte to its stdin or goes away (EOF).
"""

from __future__ import annotations

import json
import pickle
import random
import select
import sys
import time
from dataclasses import dataclass
from typing import IO

from pytest_startup_guard.races.base import Race, Target


@dataclass
class RefresherSpec:
    race: Race
    target: Target
    gap: float
    hold: float
    seed: int
    log: str


def _stop_requested(timeout: float) -> bool:
    readable, _, _ = select.select([sys.stdin.buffer], [], [], max(timeout, 0.0))
    return bool(readable)  # a byte (stop) or EOF (the test process is gone): both mean stop


def run(spec: RefresherSpec) -> None:
    rng = random.Random(spec.seed)
    with open(spec.log, "a", buffering=1) as log:
        log.write(f"ready {time.monotonic()}\n")
        while True:
            opened = time.monotonic()
            spec.race.open(spec.target)
            try:
                if spec.hold > 0 and _stop_requested(spec.hold * rng.uniform(0.5, 1.5)):
                    return
            finally:
                spec.race.close(spec.target)
                log.write(f"window {opened} {time.monotonic()}\n")
            if _stop_requested(spec.gap * rng.uniform(0.5, 1.5)):
                return


def load(stream: IO[bytes]) -> RefresherSpec:
    """Read the spec: a JSON line with the test process's ``sys.path`` (so that a race class
    from a conftest unpickles), a line with the pickle's length, then the pickle."""
    sys.path[:0] = [p for p in json.loads(stream.readline()) if p not in sys.path]
    length = int(stream.readline())
    spec = pickle.loads(stream.read(length))
    if not isinstance(spec, RefresherSpec):
        raise TypeError(f"not a refresher spec: {type(spec).__name__}")
    return spec


def dump(spec: RefresherSpec, stream: IO[bytes]) -> None:
    payload = pickle.dumps(spec)
    stream.write(
        json.dumps(sys.path).encode() + b"\n" + str(len(payload)).encode() + b"\n" + payload
    )
    stream.flush()


if __name__ == "__main__":
    # Run the importable module, not this __main__ copy, so the pickled spec's classes match.
    from pytest_startup_guard.races import refresher

    refresher.run(refresher.load(sys.stdin.buffer))
