"""Words every part may use, so that a thing is said one way: how many of something there are,
and the name of a signal.

Standard library only, and nothing of the package: the report's views (``report/words.py``
re-exports these) and the background-import scan (``imports/scan.py``) word counts the same.
"""

from __future__ import annotations

import signal


def count(number: int, word: str, plural: str | None = None) -> str:
    """``1 window``, ``2 windows``; ``plural`` where adding an ``s`` is wrong (``processes``)."""
    return f"{number} {word if number == 1 else (plural or word + 's')}"


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 77`` for a number the platform does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
