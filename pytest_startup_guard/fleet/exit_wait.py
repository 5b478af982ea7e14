"""Sleep between two looks at a fleet member, waking the moment it exits.

A member's watcher looks at its exit and its probe every ``POLL_SECONDS``. A plain sleep would
leave a member that died unnoticed for up to that long; on Linux a pidfd becomes readable when
the process exits, so the watcher sleeps in ``select`` on it and wakes at once.
"""

from __future__ import annotations

import os
import select
import time


class ExitWait:
    """``sleep(seconds)``, cut short when process ``pid`` (our own child) exits."""

    def __init__(self, pid: int) -> None:
        self._descriptor: int | None = None
        opener = getattr(os, "pidfd_open", None)
        if opener is not None:
            try:
                # Our child, not yet reaped: its pid cannot have been reused meanwhile.
                self._descriptor = opener(pid)
            except OSError:  # an older kernel, or the process is already gone: plain sleeps
                self._descriptor = None

    def sleep(self, seconds: float) -> None:
        if self._descriptor is None:
            time.sleep(seconds)
            return
        select.select([self._descriptor], [], [], seconds)

    def close(self) -> None:
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            os.close(descriptor)

    def __enter__(self) -> ExitWait:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
