"""Generic races: faults real writers leave for a moment on any shared file or folder.

Compile and kernel caches (Triton's ``~/.triton/cache``, torch inductor's cache, vLLM's
``torch_compile_cache``), ``datasets``' cache and any folder several processes share at
start-up meet the same writers as the hub cache does: a file replaced by remove-then-create, a
file rewritten in place, a download written straight into its final name, a folder renamed
aside by a cleanup. Each race here opens the fault with the writer's operations, in its order,
and closes it the way that writer finishes. They work on a ``PathTarget`` (``hub_race.arm_path``)
and on a hub repo's file (the path its snapshot pointer has).

As for the hub races, a hit is an access of the watched folder (the one that holds the file; a
hub repo's folder) while the window is open: a reader that checks a file with ``stat`` (which
the child runtime cannot see) and then opens or lists the folder has met the fault.

Copy on write holds: a file rewritten in place is first given its own inode
(``break_hard_link``, in ``rewrite.py``, the rewrite-in-place race that ``blob_rewrite`` shares),
so a race never writes through a hard link into a source folder or cache a repo was imported
from.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.races.base import PathRace, PathTarget, Race
from pytest_startup_guard.races.rewrite import RewritesInPlace


def _file_of(target: PathTarget, race: str) -> Path:
    """The target as a file; a folder is a clear error naming the race that fits it."""
    if target.path.is_dir() and not target.path.is_symlink():
        raise StartupGuardError(
            f"race {race!r} works on a file, but {target.path} is a folder: arm 'folder_move' on"
            " a folder, or name a file inside it"
        )
    if not os.path.lexists(target.path):
        raise StartupGuardError(
            f"race {race!r} needs an existing file, and {target.path} does not exist: create it"
            " (the state the start-up normally finds) before arming the race"
        )
    return target.path


class FileRace(PathRace):
    """A race on one file (not a folder): refused, when it is armed, on a folder or a path
    with nothing at it."""

    @Race.takes(PathTarget)
    def check(self, target: PathTarget) -> None:
        _file_of(target, self.name)


class FileReplace(FileRace):
    """A file replaced without a rename: the writer removes it, then creates it again, so a
    reader in between finds no file (``FileNotFoundError``). coreutils ``ln -sf`` / ``ln -sfn``
    (unlink, then symlink: the usual way scripts repoint a ``current`` link), ``cp
    --remove-destination``, and code that does ``os.remove(path)`` then ``open(path, "w")`` to
    refresh a cache entry. A symlink comes back as a symlink to the same place, a file with the
    same bytes and mode."""

    name = "file_replace"
    found = "{what} gone (removed, not yet created again)"
    # os.remove, then create and write a 1 KiB file: median 47 µs (p10-p90 43-51 µs), p99
    # under 2x CPU load 0.19 ms (benchmarks/bench_windows.py).
    window = 0.00005
    models = (
        "a file replaced by remove, then create (ln -sf, cp --remove-destination, os.remove +"
        " open(path, 'w')): the file is absent in between"
    )

    @Race.takes(PathTarget)
    def open(self, target: PathTarget) -> None:
        path = _file_of(target, self.name)
        if path.is_symlink():
            target.state.link = os.readlink(path)
        else:
            target.state.content = path.read_bytes()
            target.state.mode = path.stat().st_mode & 0o7777
        os.remove(path)  # the name goes; a hard-linked original keeps its own

    @Race.takes(PathTarget)
    def close(self, target: PathTarget) -> None:
        state = target.state
        link, content, mode = state.link, state.content, state.mode
        state.link, state.content, state.mode = None, None, 0o644
        if os.path.lexists(target.path):
            return  # someone else created it meanwhile: that is what readers see now
        if link is not None:
            os.symlink(link, target.path)
        elif content is not None:
            with open(target.path, "wb") as handle:  # the create of remove-then-create
                handle.write(content)
            os.chmod(target.path, mode)


class FileRewrite(RewritesInPlace, FileRace):
    """A file rewritten in place, truncate then write: readers in between see it empty, or
    short (``written`` > 0: the share already written). ``open(path, "w")`` then ``write``,
    ``cp`` onto an existing file, ``rsync --inplace``, ``torch.save(obj, path)`` or
    ``json.dump`` into a cache entry's own name: a half-written compile artifact, kernel binary
    or config. Triton's own ``FileCacheManager.put`` and torch inductor's ``write_atomic`` write
    a temporary file and move it into place, which this race does not model."""

    name = "file_rewrite"
    found = "{what} empty or short (truncated, not yet written back)"
    # open(path, "wb") + write 1 KiB + close: median 0.23 ms (p10-p90 0.17-0.30 ms), p99 under
    # 2x CPU load 12 ms (benchmarks/bench_windows.py).
    window = 0.00023
    models = (
        "a file rewritten in place, truncate then write (open(path, 'w'), cp onto a file,"
        " rsync --inplace, torch.save to the final name): empty or short in between"
    )

    @Race.takes(PathTarget)
    def open(self, target: PathTarget) -> None:
        real = Path(os.path.realpath(_file_of(target, self.name)))
        target.state.rewrite = self.start_rewrite(real)

    @Race.takes(PathTarget)
    def close(self, target: PathTarget) -> None:
        rewrite, target.state.rewrite = target.state.rewrite, None
        self.finish_rewrite(rewrite)


class PartialWrite(FileRewrite):
    """A file written straight into its final name as its bytes arrive, with no temporary
    name: ``urllib.request.urlretrieve``, ``wget -O``, ``curl -o``, a copy or unpack into the
    cache folder. For the window the file is there but short (half of it by default), then
    it is completed; a reader that trusts a file because it exists reads a truncated one."""

    name = "partial_write"
    found = "{what} short (written into its final name, not yet complete)"
    # urllib.request.urlretrieve of a 1 KiB file:// URL into the final name: median 0.43 ms
    # (p10-p90 0.38-0.54 ms), p99 under 2x CPU load 15 ms (benchmarks/bench_windows.py). A
    # download over the network is half written for as long as it takes: give hold= for that.
    window = 0.00044
    models = (
        "a file written into its final name as it arrives (urlretrieve, wget -O, curl -o, cp or"
        " tar into the cache): present but short for the window"
    )

    def __init__(self, written: float = 0.5) -> None:
        super().__init__(written)


class FolderMove(PathRace):
    """A folder renamed aside and back: a cache cleaner or rotation step that moves a cache
    folder away (``mv cache cache.old``) to scan, prune or archive it, then moves it back.
    In between every path under it is gone, and a process that re-creates the folder finds an
    empty one. On a file target the folder that holds the file is moved. If a process created
    the folder again meanwhile, that one is moved aside (kept, never deleted) before the
    original returns."""

    name = "folder_move"
    found = "{what} gone (its folder moved aside)"
    # os.rename aside and back: median 16 µs (p10-p90 16-19 µs), p99 under 2x CPU load 59 µs
    # (benchmarks/bench_windows.py).
    window = 0.00002
    models = (
        "a cache folder renamed aside and back by a cleanup or rotation (mv cache cache.old,"
        " then back): every path under it is gone in between"
    )

    def _folder(self, target: PathTarget) -> Path:
        path = target.path
        folder = path if path.is_dir() and not path.is_symlink() else path.parent
        if not folder.exists():
            raise StartupGuardError(f"race 'folder_move' needs an existing folder: {folder}")
        if os.path.realpath(folder) == os.path.realpath(target.root):
            raise StartupGuardError(
                f"race 'folder_move' would move {target.root_name} itself ({folder}): arm it on a"
                " folder inside it"
            )
        return folder

    @Race.takes(PathTarget)
    def check(self, target: PathTarget) -> None:
        self._folder(target)

    @Race.takes(PathTarget)
    def watched(self, target: PathTarget) -> tuple[Path, ...]:
        return (self._folder_of_state(target).parent,)

    @Race.takes(PathTarget)
    def is_hit(self, target: PathTarget, path: str) -> bool:
        folder = str(self._folder_of_state(target))
        path = os.path.abspath(path)
        return path == folder or path.startswith(folder + os.sep)

    def _folder_of_state(self, target: PathTarget) -> Path:
        folder = target.state.folder
        return folder if folder is not None else self._folder(target)

    @Race.takes(PathTarget)
    def open(self, target: PathTarget) -> None:
        folder = self._folder(target)
        aside = folder.with_name(f".{folder.name}.moved-{os.urandom(4).hex()}")
        os.rename(folder, aside)
        target.state.folder, target.state.aside = folder, aside

    @Race.takes(PathTarget)
    def close(self, target: PathTarget) -> None:
        aside, folder = target.state.aside, target.state.folder
        target.state.aside = None
        if aside is None or folder is None:
            return
        if os.path.lexists(folder):
            os.rename(folder, folder.with_name(f"{folder.name}.recreated-{os.urandom(4).hex()}"))
        os.rename(aside, folder)


GENERIC_RACES: tuple[type[Race], ...] = (FileReplace, FileRewrite, PartialWrite, FolderMove)
