"""What a race changes on disk while its window is open, measured rather than declared.

Pruning an exploration (``point_groups.py``) needs to know which accesses a race can change: an
access of anything else sees the same as in a clean start-up. Every race of the catalog, and a
user's own, changes files by its ``open`` and puts them back by its ``close``; so the change is
measured the same way for all of them: on a scratch copy of the cache, every path under its
root is looked at before the window and inside it, and the paths that look different are the
change (a symlink's target, a file's identity, size, time and small contents, a folder's
entries, whether the path exists at all).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from pytest_startup_guard.races.base import Race, Target
from pytest_startup_guard.runtime.observation import unobserved

# Files up to this size are compared by their bytes too (a config, a ref): a rewrite in place
# within one clock tick keeps size and time. Larger ones (weights) by identity, size and time.
_HASHED_BYTES = 1 << 20
_State = tuple[object, ...]


def _state(path: str) -> _State:
    """How ``path`` looks to a process: what ``lstat`` says, and for what a name leads to (a
    symlink followed), its identity, size, modification time and small contents."""
    try:
        own = os.lstat(path)
    except OSError as error:
        return ("missing", error.errno)
    link = os.readlink(path) if stat.S_ISLNK(own.st_mode) else None
    try:
        final = os.stat(path)
    except OSError as error:
        return ("dangling", link, error.errno)
    if stat.S_ISDIR(final.st_mode):
        try:
            entries: tuple[str, ...] = tuple(sorted(os.listdir(path)))
        except OSError as error:
            return ("folder", link, error.errno)
        return ("folder", link, entries)
    digest = None
    if stat.S_ISREG(final.st_mode) and final.st_size <= _HASHED_BYTES:
        try:
            with open(path, "rb") as handle:
                digest = hashlib.sha1(handle.read()).hexdigest()
        except OSError as error:
            digest = f"unreadable {error.errno}"
    return ("file", link, final.st_ino, final.st_size, final.st_mtime_ns, final.st_mode, digest)


def _look(root: Path) -> dict[str, _State]:
    """Every path under ``root`` (relative to it) and how it looks."""
    seen: dict[str, _State] = {}
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            path = os.path.join(folder, name)
            seen[os.path.relpath(path, root)] = _state(path)
    return seen


def changed_paths(race: Race, target: Target, root: Path) -> frozenset[str]:
    """The paths under ``root`` (relative to it) that look different while ``race`` holds its
    window open on ``target``: ``target`` must be on a scratch copy that nothing else reads."""
    with unobserved():
        before = _look(root)
        race.open(target)
        try:
            during = _look(root)
        finally:
            race.close(target)
    return frozenset(
        path for path in before.keys() | during.keys() if before.get(path) != during.get(path)
    )


__all__ = ["changed_paths"]
