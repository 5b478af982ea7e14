"""Waiting in tests for something another process does: poll a check until it holds."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(check: Callable[[], object], seconds: float = 30.0, interval: float = 0.02) -> bool:
    """Whether ``check()`` became true within ``seconds``, asked every ``interval`` seconds."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True
