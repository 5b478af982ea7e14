"""Opt-in pruning (``explore(..., prune=True)``): the access points whose run can be inferred.

Exploring runs every point by default. With ``prune=True`` one rule, and only one, lets a point
go unrun: a point's window opens right before a process's nth access and changes only what the
race changes (``changes.py``: measured on a scratch copy); if from that access on no process
makes an access or a look (``os.stat``, ``lstat``, ``access``, ``readlink``: what
``os.path.exists``, ``isfile``, ``realpath`` go through) that touches one of those paths, the
window meets nothing the race changes, in any process, for as long as it is open or after: the
run reads what a clean start-up reads. Such points are *inert*; the first of them is run, and
the others are reported as **inferred, not run**, ending as it did.

What the rule assumes (the docs say it to users): every read that decides is seen (a read in
native code is seen only with ``native_accesses=True``; a look through a file descriptor,
``os.fstat``, or a read of ``/proc`` is not), and the start-up does the same accesses in the
same order when nothing is raced (no thread racing another to the cache).

Rules that once grouped more are gone because they cannot be made sound:

- a point grouped with the next access that touches the change ("its window meets it"): the
  earlier window also closes earlier, so a retry that outlasts one window and not the other, or
  work longer than the hold between the two accesses, ends them differently;
- repeats by one code site (the same call stack, path and operation, the cache unchanged)
  taken for one point: the code's state differs between them (a loop over optional and
  required files, a second pass that is not guarded), and no access says so.

The model only: ``fleet/explore/explorer.py`` measures, launches and judges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pytest_startup_guard.runtime.events import AccessEvent


def _every(counted: Mapping[int, Sequence[AccessEvent]]) -> list[AccessEvent]:
    return [access for accesses in counted.values() for access in accesses]


@dataclass(frozen=True)
class PointGroup:
    """Access points that end the same way: ``numbers`` (ascending), the one to run
    (``representative``), and for an inferred point, why (``reason``)."""

    numbers: tuple[int, ...]
    representative: int
    inert: bool  # no process meets an access the race changes from these points on
    reasons: Mapping[int, str]

    def reason(self, number: int) -> str:
        return self.reasons.get(number, "")


def group_points(
    counted: Mapping[int, Sequence[AccessEvent]],
    looks: Sequence[AccessEvent],
    touches: Callable[[AccessEvent], bool],
    found: int,
    explored: Sequence[int] = (),
) -> list[PointGroup]:
    """The groups of points 1 to ``found``: one of the inert points, and every other point
    alone.

    ``counted``: each clean process's accesses that count towards ``nth`` (in order);
    ``looks``: the clean processes' looks at the cache; ``touches``: whether an access or a
    look touches what the race changes; ``explored``: points already run, which represent
    their group first."""
    touched = [event.t for event in (*_every(counted), *looks) if touches(event)]
    last_touch = max(touched) if touched else None

    def inert(number: int) -> bool:
        # Every process that makes its access ``number`` opens a window there; another
        # process's later touch meets it as well (they share the clone, or the cache).
        opened = [
            accesses[number - 1].t for accesses in counted.values() if len(accesses) >= number
        ]
        return last_touch is None or (bool(opened) and min(opened) > last_touch)

    inert_points = [number for number in range(1, found + 1) if inert(number)]
    groups = [
        PointGroup((number,), number, False, {})
        for number in range(1, found + 1)
        if number not in inert_points
    ]
    if inert_points:
        representative = next((n for n in inert_points if n in explored), inert_points[0])
        reasons = {
            number: (
                f"from #{number} on, as from #{representative}, no process accesses or looks at"
                " anything the race changes: its run reads what a clean start-up reads"
            )
            for number in inert_points
            if number != representative
        }
        groups.append(PointGroup(tuple(inert_points), representative, True, reasons))
    return sorted(groups, key=lambda group: group.numbers[0])


__all__ = ["PointGroup", "group_points"]
