"""Group the access points of a clean start-up whose explored runs can only end the same way.

A point's window opens right before a process's nth access and changes only what the race
changes (``changes.py``: measured on a scratch copy). Until a process makes an access that
touches one of those paths, everything it reads is what a clean start-up reads; so what a point
can change is decided by the first such access ("meets") each process makes from its nth access
on:

- a point whose processes meet no such access from there on changes nothing they read: every
  such point ends as a clean start-up does (*inert*);
- two points whose processes meet the same accesses end the same way: a point that opens before
  an access of another file ends as the point of the access its window meets;
- two points whose processes meet accesses made by the same code (the call stack's files and
  lines: ``AccessEvent.site``), of the same path by the same operation, with the cache unchanged
  between them (no process wrote, renamed, removed or locked anything in between), end the same
  way: a loop of ``hf_hub_download`` calls reading ``refs/main``, a retry.

Points with the same key form a group; one point per group is explored and the others are
covered by it, with the reason. Where a process reported no sites, its accesses are never taken
for repeats.

A native access (``launch(native_accesses=True)``: a libc call of C, C++ or Rust code,
``AccessEvent.native``) has no Python call stack, so no site: it is never taken for a repeat of
another access (each is a key of its own: the points whose windows meet it first are grouped
with its own point, as for any access, and it is explored). Nor does it say whether an open
writes: a native open counts as a change of the cache, so no two accesses on either side of it
are taken for repeats. The model only: ``fleet/explore/explorer.py`` measures, launches and
judges.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pytest_startup_guard.runtime.events import (
    FILE_OPS,
    READ_OPS,
    AccessEvent,
)

# Operations that change the cache: every file operation but those that read (an open counts
# when it may write: ``AccessEvent.writes``); a lock changes what another process's lock does.
CHANGING_OPS = frozenset(FILE_OPS) - frozenset(READ_OPS)

_Key = tuple[object, ...]


def changes_cache(access: AccessEvent) -> bool:
    """Whether ``access`` may change the cache. A native open (``AccessEvent.native``: the
    interposer does not say how it opens) counts as one that may write."""
    return access.op in CHANGING_OPS or (access.op == "open" and (access.writes or access.native))


@dataclass(frozen=True)
class PointGroup:
    """Access points that end the same way: ``numbers`` (ascending), the one to explore
    (``representative``), and for a covered point, why it is covered (``reason``)."""

    numbers: tuple[int, ...]
    representative: int
    inert: bool  # no process meets an access the race changes from these points on
    reasons: Mapping[int, str]
    # Points run besides the representative: in a group of repeats, the one meeting the last
    # repeat (the same code may treat its first and later calls differently: a group whose
    # runs disagree is run point by point).
    samples: tuple[int, ...] = ()

    def reason(self, number: int) -> str:
        return self.reasons.get(number, "")


@dataclass(frozen=True)
class _Meeting:
    """The first access a process makes from a point on that the race can change."""

    index: int  # in that process's counted accesses
    access: AccessEvent
    key: _Key


def _relative(path: str | None, root: str) -> str | None:
    if path is None:
        return None
    return os.path.relpath(path, root) if path.startswith(root + os.sep) else path


class _Process:
    """One process of the clean start-up: its counted accesses and what each point meets."""

    def __init__(
        self,
        pid: int,
        accesses: Sequence[AccessEvent],
        touches: Callable[[AccessEvent], bool],
        changes_before: Callable[[float], int],
        root: str,
    ) -> None:
        self.pid = pid
        self.accesses = list(accesses)
        self._meetings: list[_Meeting | None] = [None] * len(self.accesses)
        following: _Meeting | None = None
        for index in range(len(self.accesses) - 1, -1, -1):
            access = self.accesses[index]
            if touches(access):
                # Without a site (a native access has none), a repeat cannot be told from
                # other code: unique to itself.
                site = (
                    access.site
                    if access.site is not None and not access.native
                    else ("index", pid, index)
                )
                key: _Key = (
                    access.op,
                    _relative(access.path, root),
                    _relative(access.other, root),
                    site,
                    changes_before(access.t),
                )
                following = _Meeting(index, access, key)
            self._meetings[index] = following

    def meeting(self, number: int) -> _Meeting | None:
        """What the window of point ``number`` meets first in this process (None: nothing)."""
        return self._meetings[number - 1] if number <= len(self.accesses) else None

    def key(self, number: int) -> _Key:
        if number > len(self.accesses):
            return ("no window",)  # this process never makes that many accesses
        meeting = self.meeting(number)
        return ("inert",) if meeting is None else ("meets", meeting.key)


def group_points(
    counted: Mapping[int, Sequence[AccessEvent]],
    every_access: Sequence[AccessEvent],
    touches: Callable[[AccessEvent], bool],
    found: int,
    busiest: int,
    root: str,
    label: Callable[[int], str],
    explored: Sequence[int] = (),
) -> list[PointGroup]:
    """The groups of points 1 to ``found``.

    ``counted``: each clean process's accesses that count towards ``nth`` (in order);
    ``every_access``: every access of the clean processes (for when the cache changed);
    ``touches``: whether an access touches what the race changes; ``busiest``: the pid whose
    accesses number the points; ``root``: the cache root; ``label``: a point's access in words;
    ``explored``: points already explored, which represent their group first."""
    change_times = sorted(access.t for access in every_access if changes_cache(access))

    def changes_before(t: float) -> int:
        return sum(1 for changed in change_times if changed < t)

    processes = [
        _Process(pid, accesses, touches, changes_before, root)
        for pid, accesses in sorted(counted.items())
    ]
    main = next(process for process in processes if process.pid == busiest)
    keys: dict[_Key, list[int]] = {}
    for number in range(1, found + 1):
        keys.setdefault(tuple(process.key(number) for process in processes), []).append(number)
    groups = []
    for key, numbers in keys.items():
        inert = all(part in (("inert",), ("no window",)) for part in key)
        representative = _representative(numbers, main, explored)
        samples = _last_repeat(numbers, main, representative)
        reasons = {
            number: _reason(number, representative, main, inert, label)
            for number in numbers
            if number != representative
        }
        groups.append(PointGroup(tuple(numbers), representative, inert, reasons, samples))
    return sorted(groups, key=lambda group: group.numbers[0])


def _representative(numbers: list[int], main: _Process, explored: Sequence[int]) -> int:
    """An explored point of the group; else one whose own access is what its window meets
    (the window opens right at it), else the first."""
    for number in numbers:
        if number in explored:
            return number
    for number in numbers:
        meeting = main.meeting(number)
        if meeting is not None and meeting.index == number - 1:
            return number
    return numbers[0]


def _last_repeat(numbers: list[int], main: _Process, representative: int) -> tuple[int, ...]:
    """The point meeting the group's last repeat in the busiest process, if its points meet
    more than one access there (else nothing more to run)."""
    meetings = {m.index: n for n in numbers if (m := main.meeting(n)) is not None}
    if len(meetings) < 2:
        return ()
    last = max(meetings)
    number = last + 1 if last + 1 in numbers else meetings[last]
    return () if number == representative else (number,)


def _reason(
    number: int, representative: int, main: _Process, inert: bool, label: Callable[[int], str]
) -> str:
    if inert:
        return (
            f"from #{number} on, as from #{representative}, no process accesses anything the"
            " race changes: its run reads what a clean start-up reads"
        )
    mine, theirs = main.meeting(number), main.meeting(representative)
    if mine is not None and theirs is not None and mine.index == theirs.index:
        met = f"#{mine.index + 1} ({label(mine.index + 1)})"
        if mine.index == number - 1:
            return f"its window opens right at {met}, the access #{representative}'s meets first"
        return (
            f"#{number} ({label(number)}) does not touch what the race changes: its window"
            f" first meets {met}, as #{representative}'s does"
        )
    if mine is not None and theirs is not None and mine.index < len(main.accesses):
        return (
            f"its window first meets #{mine.index + 1} ({label(mine.index + 1)}), a repeat of"
            f" #{theirs.index + 1} that #{representative}'s meets: the same code, the same"
            " operation and path, the cache unchanged in between"
        )
    return (
        f"its window meets the same accesses as #{representative}'s in every process (repeats:"
        " the same code, operation and path, the cache unchanged in between)"
    )


__all__ = ["CHANGING_OPS", "PointGroup", "changes_cache", "group_points"]
