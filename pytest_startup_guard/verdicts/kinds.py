"""The kinds of a ``startup_races`` case and the words for their verdicts, said once.

Standard library only: the report's views (``report/words.py``) and the CI-matrix merge command,
which starts without pytest, say a verdict with these words too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# transient: a race that must be survived; corrupt: a persistent corruption that must fail
# closed; stale: a lock a dead process left, which must be broken or fail closed; rebuild: a
# corrupt cache entry, which must be discarded and rebuilt (the start-up comes up, the entry whole).
CaseKind = Literal["transient", "corrupt", "stale", "rebuild"]
KINDS: tuple[CaseKind, ...] = ("transient", "corrupt", "stale", "rebuild")


@dataclass(frozen=True)
class KindWords:
    """How each kind of case is said: its fault, what is expected, and the two verdicts."""

    noun: str  # what a name of this kind names: "race"
    expected: str  # "survive"
    done: str  # as expected: "survived"
    missed: str  # not as expected: "did not survive"


WORDS: dict[CaseKind, KindWords] = {
    "transient": KindWords("race", "survive", "survived", "did not survive"),
    "corrupt": KindWords("corruption", "fail closed", "failed closed", "did not fail closed"),
    "stale": KindWords(
        "stale lock",
        "recover or fail closed",
        "recovered or failed closed",
        "hung or failed unclearly on the stale lock",
    ),
    "rebuild": KindWords(
        "file corruption",
        "rebuild",
        "rebuilt the cache entry",
        "did not rebuild the cache entry",
    ),
}


__all__ = ["KINDS", "WORDS", "CaseKind", "KindWords"]
