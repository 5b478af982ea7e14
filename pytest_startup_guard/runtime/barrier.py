"""A fleet's start barrier on the test side: its members wait at boot until released at once.

The child side of it is ``child.join`` (a member blocks reading the group's FIFO); the
controller counts arrivals at each hello and answers a member that must wait with the FIFO.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_startup_guard.runtime.events import ReleaseListener
from pytest_startup_guard.runtime.protocol import MEMBER_ENV


@dataclass
class BarrierGroup:
    """Fleet members that wait at boot until ``release`` lets them all go at once.

    Each held member blocks reading one byte from the group's FIFO; ``release`` writes one byte
    per held member in a single write, which wakes them all together: measured, 8 children woke
    within 0.5 ms of each other, where one socket message each spread them out, every woken
    child delaying the rest.

    ``arrival`` is the controller's condition (on its lock), notified at each hello; ``released``
    tells the controller's release listeners when the group was let go.
    """

    name: str
    size: int
    fifo: str
    arrival: threading.Condition = field(repr=False)
    released: ReleaseListener = field(repr=False)
    arrived: dict[int, int] = field(default_factory=dict)  # member index -> pid
    held: int = 0
    released_t: float | None = None
    _descriptor: int | None = None

    def open(self) -> None:
        os.mkfifo(self.fifo)
        self._descriptor = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)

    def close(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None

    def member_env(self, index: int) -> dict[str, str]:
        return {MEMBER_ENV: f"{self.name}:{index}"}

    def wait_for_arrivals(
        self, deadline: float, still_coming: Callable[[int], bool] | None = None
    ) -> list[int]:
        """Wait until every member arrived, every missing one is no longer coming
        (``still_coming(index)`` is False: it exited, or is not Python), or the deadline passed.
        Returns the indexes that did not arrive."""
        with self.arrival:
            while True:
                missing = [i for i in range(self.size) if i not in self.arrived]
                coming = [i for i in missing if still_coming is None or still_coming(i)]
                remaining = deadline - time.monotonic()
                if not coming or remaining <= 0:
                    return missing
                # Woken by each hello; the time-out only re-asks still_coming (process exits).
                self.arrival.wait(min(remaining, 0.05))

    def release(self) -> float:
        """Let every held member go; later arrivals pass straight through."""
        with self.arrival:  # the controller's lock: no hello is counted half-way through
            if self.released_t is not None:
                return self.released_t
            self.released_t = time.monotonic()
            if self.held and self._descriptor is not None:
                os.write(self._descriptor, b"x" * self.held)
            self.released(self.released_t)
            return self.released_t


__all__ = ["BarrierGroup"]
