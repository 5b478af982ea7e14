"""Words every part may use, so that a thing is said one way: how many of something there are.

Standard library only, and nothing of the package: the report's views (``report/words.py``
re-exports these) and the background-import scan (``imports/scan.py``) word counts the same.
"""

from __future__ import annotations


def count(number: int, word: str, plural: str | None = None) -> str:
    """``1 window``, ``2 windows``; ``plural`` where adding an ``s`` is wrong (``processes``)."""
    return f"{number} {word if number == 1 else (plural or word + 's')}"
