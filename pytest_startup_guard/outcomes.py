"""How a raced start-up ended: one outcome type for the cases, the explorations and the report.

A start-up raced at one point (an access point of an exploration, a pair of the writer
exploration), or judged by a case's check, ends:

- ``survived``: it came through the race;
- ``failed``: it did not (a member rejected, hung, exited, or a worker died);
- ``undecided``: the machine was too slow to decide (a member never had its time), which is
  no verdict on the code under test;
- ``not reached``: the race never met it, so it proves nothing.

A check's ``Problem`` carries its outcome (``failed``, ``undecided`` or ``not judged``: a
process started up, but its read of the raced file was never seen, so whether it survived is
not known; never green): a check whose problems are all undecided is undecided, one whose
problems are all not judged could not be judged; read from the type, never from the problem's
words. Shared by every part (it imports nothing of the package).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Failing = Literal["failed", "undecided", "not judged"]  # what a problem makes of a start-up
Outcome = Literal["survived", "not reached"] | Failing
OUTCOMES: tuple[Outcome, ...] = ("survived", "failed", "undecided", "not reached")
UNDECIDED_MARK = "UNDECIDED: "  # how an undecided problem's line begins, for a person


@dataclass(frozen=True)
class Problem:
    """One thing a check found wrong, as its line reads, and what it makes of the start-up."""

    text: str
    outcome: Failing = "failed"

    @classmethod
    def undecided(cls, text: str) -> Problem:
        """A problem that is only the machine's slowness: its line says ``UNDECIDED:`` first."""
        return cls(f"{UNDECIDED_MARK}{text}", "undecided")

    def __str__(self) -> str:
        return self.text


def failed(texts: Sequence[str]) -> list[Problem]:
    """Problems that fail the start-up, from their lines."""
    return [Problem(text) for text in texts]


def all_undecided(problems: Sequence[Problem]) -> bool:
    """Whether there are problems and every one is undecided: the check is undecided."""
    return bool(problems) and all(problem.outcome == "undecided" for problem in problems)


def all_not_judged(problems: Sequence[Problem]) -> bool:
    """Whether there are problems and every one is a process that could not be judged."""
    return bool(problems) and all(problem.outcome == "not judged" for problem in problems)
