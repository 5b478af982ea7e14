"""The kinds of a ``startup_races`` case and the words for their verdicts, said once.

Standard library only: the report's views (``report/words.py``) and the CI-matrix merge command,
which starts without pytest, say a verdict with these words too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# transient: a race that must be survived; corrupt: a persistent corruption that must fail
# closed; stale: a lock a dead process left, which must be broken or fail closed.
CaseKind = Literal["transient", "corrupt", "stale"]
KINDS: tuple[CaseKind, ...] = ("transient", "corrupt", "stale")


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
}


__all__ = ["KINDS", "WORDS", "CaseKind", "KindWords"]
