"""Transient races: faults that real writers leave on disk for a moment, then take away.

Each race has a window. ``open`` puts the fault on disk and ``close`` makes the cache whole
again, by the same operations, in the same order, as the writer it models; the time between is
the window. Users add races by subclassing ``Race`` and registering a name with
``register_race`` (or returning them from the ``pytest_startup_guard_races`` hook).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_startup_guard.cache.layout import break_hard_link, relative_link_target
from pytest_startup_guard.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    StartupGuardError,
    UnknownNameError,
)
from pytest_startup_guard.races.base import PathTarget, Race, RaceTarget
from pytest_startup_guard.races.generic import GENERIC_RACES
from pytest_startup_guard.races.held_locks import HELD_LOCKS, LockHeld
from pytest_startup_guard.races.locks import STALE_LOCKS
from pytest_startup_guard.races.rewrite import RewritesInPlace


class PointerSwap(Race):
    """huggingface_hub's ``_create_symlink`` on an existing pointer: ``os.remove(dst)``, then
    ``os.symlink(relative_src, dst)`` — the pointer is absent in between. huggingface_hub: open
    up to 0.31.4; closed from 0.32.0 (docs/hub-versions.md). Up to 0.24.6 a ``force_download``
    re-created the live pointer after the download; up to 0.31.4 the blob-present path created
    pointers outside the blob lock, so a second process creating the same pointer removed the
    first one's. From 0.32.0 it is called only under the blob's lock and only when the pointer
    is missing: a live pointer is swapped only where that lock does not exclude other
    processes, while two of them create the same missing pointer."""

    name = "pointer_swap"
    found = "{what} gone (its pointer removed, not yet re-created)"
    # huggingface_hub 2.4.0's own _create_symlink on a live pointer, os.remove to os.symlink:
    # median 90 µs (p10-p90 54-96 µs), p99 under 2x CPU load 16 ms (benchmarks/bench_windows.py).
    window = 0.0001
    models = (
        "huggingface_hub _create_symlink re-creating a live pointer (remove, then symlink):"
        " open up to 0.31.4; closed from 0.32.0 (force_download up to 0.24.6, concurrent"
        " creation outside the blob lock up to 0.31.4)"
    )

    @Race.takes(RaceTarget)
    def raced_files(self, target: RaceTarget) -> tuple[Path, ...]:
        return (target.pointer,)  # the blob stays as it is

    @Race.takes(RaceTarget)
    def open(self, target: RaceTarget) -> None:
        try:
            os.remove(target.pointer)
        except OSError:
            pass  # as _create_symlink: errors of the remove are ignored

    @Race.takes(RaceTarget)
    def close(self, target: RaceTarget) -> None:
        if os.path.lexists(target.pointer):
            return
        target.pointer.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(relative_link_target(target.pointer, target.blob), target.pointer)


class RefRewrite(Race):
    """``refs/<revision>`` truncated, then written: a reader in between sees an empty ref, so the
    revision resolves to ``""`` and ``try_to_load_from_cache`` returns None. huggingface_hub:
    open up to 1.30.0; closed from 1.31.0 (docs/hub-versions.md). ``snapshot_download`` did
    ``open(ref, "w")`` then ``write(commit)`` on every call (even with the same commit) up to
    1.30.0 and uses the atomic helper from 1.31.0. ``hf_hub_download``'s
    ``_cache_commit_hash_for_specific_revision`` rewrote the ref in place on every call up to
    0.11.1, only when it was missing or named another commit (a refresh) from 0.12.0, and
    writes a temporary file moved with ``os.replace`` from 1.18.0."""

    changes_names = False  # rewritten in place: a listing shows the same names

    name = "ref_rewrite"
    found = "{what} empty (truncated, not yet written)"
    # open(ref, "w") + write(commit) + close, as snapshot_download up to 1.30.0: median 0.23 ms
    # (p10-p90 0.18-0.28 ms), p99 under 2x CPU load 4.0 ms (benchmarks/bench_windows.py).
    window = 0.00023
    models = (
        "refs/<revision> truncated, then written: snapshot_download on every call up to 1.30.0;"
        " hf_hub_download on every call up to 0.11.1, on a refresh up to 1.17.0;"
        " open up to 1.30.0; closed from 1.31.0"
    )

    @Race.takes(RaceTarget)
    def raced_files(self, target: RaceTarget) -> tuple[Path, ...]:
        return (target.ref,)  # a reader resolving the revision meets it; the file stays

    @Race.takes(RaceTarget)
    def open(self, target: RaceTarget) -> None:
        break_hard_link(target.ref)
        target.state.ref_handle = open(target.ref, "w")  # noqa: SIM115 - written when it closes

    @Race.takes(RaceTarget)
    def close(self, target: RaceTarget) -> None:
        handle, target.state.ref_handle = target.state.ref_handle, None
        if handle is None:
            handle = open(target.ref, "w")  # noqa: SIM115
        with handle:
            handle.write(target.commit)


class BlobRewrite(RewritesInPlace, Race):
    """A blob rewritten in place (truncate, then write), as a sync or copy tool (rsync
    --inplace, cp onto an existing file) does: readers see it empty, or short when
    ``written`` > 0 (the share of the content already written when the window opens).
    huggingface_hub itself never does: closed in every release from 0.8.1 to 2.4.0 (it writes a
    temporary or ``.incomplete`` file and moves it into place; docs/hub-versions.md)."""

    name = "blob_rewrite"
    found = "{what} empty or short (its blob truncated, not yet written back)"
    # shutil.copyfile of a 1 KiB config onto the blob (cp onto a file): median 0.26 ms
    # (p10-p90 0.21-0.37 ms), p99 under 2x CPU load 8.3 ms (benchmarks/bench_windows.py).
    window = 0.00026
    models = (
        "a sync or copy tool rewriting a blob in place: truncate, then write (huggingface_hub:"
        " closed in every release from 0.8.1 to 2.4.0)"
    )

    @Race.takes(RaceTarget)
    def open(self, target: RaceTarget) -> None:
        target.state.rewrite = self.start_rewrite(target.blob)

    @Race.takes(RaceTarget)
    def close(self, target: RaceTarget) -> None:
        rewrite, target.state.rewrite = target.state.rewrite, None
        self.finish_rewrite(rewrite)


class DanglingPointer(Race):
    """The pointer is there but its blob is not — a third-party cleaner removed it (a tmp
    reaper, ``find blobs -atime -delete``), or a shared file system shows the link before the
    blob — then the blob returns the way huggingface_hub writes one:
    ``blobs/<etag>.<hex>.incomplete`` moved into place. huggingface_hub's own deletion
    (``delete_revisions().execute()``, ``huggingface-cli delete-cache``) removes snapshots
    before blobs: closed in every release from 0.8.1 to 2.4.0 (docs/hub-versions.md)."""

    name = "dangling_pointer"
    found = "{what} dangling (its blob gone)"
    # The blob removed, written back as .incomplete and moved with huggingface_hub's own
    # _chmod_and_move (a 1 KiB config from a local source): median 0.11 ms (p10-p90
    # 0.09-0.18 ms), p99 under 2x CPU load 0.36 ms (benchmarks/bench_windows.py). A blob that
    # comes back over the network is gone for the whole download: give hold= for that.
    window = 0.00012
    models = (
        "a third-party cache cleaner deleting a blob, then a download putting it back"
        " (.incomplete + rename); huggingface_hub delete-cache: closed in every release from"
        " 0.8.1 to 2.4.0 (snapshots go before blobs)"
    )

    @Race.takes(RaceTarget)
    def open(self, target: RaceTarget) -> None:
        if target.state.content is None:
            target.state.content = target.blob.read_bytes()
        try:
            os.remove(target.blob)  # a hard-linked original keeps its own name: not reached
        except FileNotFoundError:
            pass

    @Race.takes(RaceTarget)
    def close(self, target: RaceTarget) -> None:
        content, target.state.content = target.state.content, None
        if content is None or target.blob.exists():
            return
        incomplete = target.blob.with_name(f"{target.blob.name}.{os.urandom(8).hex()}.incomplete")
        incomplete.write_bytes(content)
        os.replace(incomplete, target.blob)


_HUB_RACES: tuple[type[Race], ...] = (
    PointerSwap,
    RefRewrite,
    BlobRewrite,
    DanglingPointer,
    LockHeld,
)
_BUILTIN: tuple[type[Race], ...] = (*_HUB_RACES, *GENERIC_RACES, *STALE_LOCKS, *HELD_LOCKS)
RACES: dict[str, type[Race]] = {race.name: race for race in _BUILTIN}


def register_race(name: str, race: type[Race]) -> None:
    """Make ``race`` (a ``Race`` subclass) known as ``name`` to ``arm`` and ``startup_races``."""
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidArgumentError(
            f"invalid race name {name!r}: expected an identifier such as 'my_race'"
        )
    if not (isinstance(race, type) and issubclass(race, Race)):
        raise ArgumentTypeError(f"invalid race {race!r} for {name!r}: expected a subclass of Race")
    existing = RACES.get(name)
    if existing is not None and existing is not race:
        raise StartupGuardError(f"race name {name!r} is taken by {existing.__qualname__}")
    RACES[name] = race


def register_races(
    results: Iterable[Mapping[str, type[Race]] | Iterable[type[Race]] | None],
) -> None:
    """Register what ``pytest_startup_guard_races`` implementations returned: mappings of name
    to race class, or race classes carrying their ``name``."""
    for result in results:
        if result is None:
            continue
        pairs = (
            result.items()
            if isinstance(result, Mapping)
            else ((race.name, race) for race in result)
        )
        for name, race in pairs:
            register_race(name, race)


def get_race(race: str | Race, where: str = "") -> Race:
    """A race instance from a name or an instance; unknown names list the known ones."""
    if isinstance(race, Race):
        return race
    if not isinstance(race, str) or race not in RACES:
        raise UnknownNameError("race", race, RACES, where)
    return RACES[race]()


def races_for_all() -> list[str]:
    """The names ``transient="all"`` stands for."""
    return [name for name, race in RACES.items() if race.in_all]


def stale_races() -> list[str]:
    """The names ``startup_races(stale=[...])`` accepts (``stale="all"``: every one)."""
    return [name for name, race in RACES.items() if race.stale]


__all__ = [
    "RACES",
    "PathTarget",
    "Race",
    "RaceTarget",
    "get_race",
    "races_for_all",
    "register_race",
    "register_races",
    "stale_races",
]
