"""Real repos as sources of the fake cache: a local folder, or one revision in a real hub cache.

Its one responsibility: read a source, never write it, and say what one revision of a repo
holds (each file's name, etag and the source file behind it), or why the source cannot give a
whole revision. ``FakeHubCache.add_from_folder`` and ``add_from_cache`` then place those files
in the fake cache's own layout: blobs hard-linked to the source where the file system allows
(copied otherwise), pointers and refs of its own; copy on write (``layout.break_hard_link``)
keeps every later in-place write away from the source.

The user's hub cache is found as huggingface_hub finds it (``HF_HUB_CACHE``, else
``HUGGINGFACE_HUB_CACHE``, else ``HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
``~/.cache/huggingface/hub``), read from the environment at call time as it was before any fake
cache's env was applied, without importing huggingface_hub.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_startup_guard.cache.env import hub_paths, outer_environ
from pytest_startup_guard.cache.layout import (
    REPO_TYPES,
    file_etag,
    is_commit,
    repo_folder_name,
    validate_filename,
    validate_revision,
)
from pytest_startup_guard.checks import path as checked_path
from pytest_startup_guard.errors import InvalidArgumentError, StartupGuardError

# What a folder holds that is not a file of the repo: git's own data (a checkout, a worktree's
# .git file, a submodule's) and huggingface_hub's bookkeeping of ``hf download --local-dir``.
SKIPPED_IN_FOLDERS = (".git", ".cache/huggingface")
_INCOMPLETE = ".incomplete"
_LISTED = 8  # repos, refs or snapshots named in an error message


class RepoSourceError(StartupGuardError, ValueError):
    """A folder or hub cache that cannot give the files of a whole repo revision."""


@dataclass(frozen=True)
class SourceFile:
    """One file of a source: the path to link or copy (symlinks resolved) and its etag."""

    path: Path
    etag: str


@dataclass(frozen=True)
class RepoSource:
    """One revision of a repo, read from a source: what the fake cache writes for it."""

    files: Mapping[str, SourceFile]
    commit: str | None = None  # the source's own commit; None: derived from the content
    no_exist: tuple[str, ...] = field(default=())  # the source's .no_exist entries

    @property
    def etags(self) -> dict[str, str]:
        return {name: source.etag for name, source in self.files.items()}


# -- a local folder ------------------------------------------------------------------------


def read_folder(folder: str | os.PathLike[str], where: str, lfs_threshold: int) -> RepoSource:
    """Every file under ``folder`` (nested ones too) with its etag, hashed as the hub would.

    Skipped: ``SKIPPED_IN_FOLDERS`` at the top (a ``.git`` anywhere). Other hidden files (a
    repo's ``.gitattributes``) are files of the repo. Symlinks are followed, to files and to
    folders (each folder read once).
    """
    root = Path(checked_path("folder", folder, where)).expanduser().absolute()
    if not root.exists():
        raise RepoSourceError(
            f"source folder {str(root)!r} in {where} does not exist: expected a folder of the"
            " repo's files, such as one written by save_pretrained() or a checkout"
        )
    if not root.is_dir():
        raise RepoSourceError(
            f"source folder {str(root)!r} in {where} is not a folder: expected a folder of the"
            " repo's files, such as one written by save_pretrained() or a checkout"
        )
    files: dict[str, SourceFile] = {}
    seen_folders: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        here = Path(dirpath)
        status = os.stat(here)
        if (status.st_dev, status.st_ino) in seen_folders:  # a symlink loop, or a folder twice
            dirnames[:] = []
            continue
        seen_folders.add((status.st_dev, status.st_ino))
        relative = here.relative_to(root).as_posix()
        dirnames[:] = sorted(d for d in dirnames if not _skipped(relative, d))
        for name in sorted(filenames):
            path = here / name
            filename = name if relative == "." else f"{relative}/{name}"
            if _skipped(relative, name):
                continue
            files[validate_filename(filename)] = _folder_file(path, filename, where, lfs_threshold)
    hub_downloads = root / ".cache" / "huggingface" / "download"
    incomplete = sorted(
        str(path.relative_to(root)) for path in hub_downloads.rglob(f"*{_INCOMPLETE}")
    )
    if incomplete:
        raise RepoSourceError(
            f"source folder {str(root)!r} in {where} is a partial download: huggingface_hub"
            f" has not finished {', '.join(incomplete)}. Finish it (hf download <repo>"
            f" --local-dir {root}) or remove the .incomplete file"
        )
    if not files:
        raise RepoSourceError(
            f"source folder {str(root)!r} in {where} has no files (skipped: "
            f"{', '.join(SKIPPED_IN_FOLDERS)}): expected the repo's files, such as config.json"
        )
    return RepoSource(files=files)


def _skipped(relative: str, name: str) -> bool:
    if name == ".git":
        return True
    path = name if relative == "." else f"{relative}/{name}"
    return path in SKIPPED_IN_FOLDERS


def _folder_file(path: Path, filename: str, where: str, lfs_threshold: int) -> SourceFile:
    real = Path(os.path.realpath(path))
    try:
        status = os.stat(real)
    except FileNotFoundError:
        raise RepoSourceError(
            f"{filename!r} of the source folder in {where} is missing: {path} is a symlink to"
            f" {os.readlink(path)!r}, which does not exist (a partial snapshot or checkout);"
            " expected every file to be there"
        ) from None
    if not stat.S_ISREG(status.st_mode):
        raise RepoSourceError(
            f"{filename!r} of the source folder in {where} is not a regular file ({path}):"
            " expected the repo's files and folders only"
        )
    return SourceFile(real, file_etag(real, filename, lfs_threshold))


# -- a real hub cache ------------------------------------------------------------------------


def resolve_hub_cache(hub_cache_dir: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """The hub cache to read and where that came from (for messages)."""
    if hub_cache_dir is not None:
        given = checked_path("hub_cache_dir", hub_cache_dir, "add_from_cache()")
        return Path(given).expanduser().absolute(), "the hub_cache_dir argument"
    environ = outer_environ()
    if "HF_HUB_CACHE" in environ:
        origin = "HF_HUB_CACHE"
    elif "HUGGINGFACE_HUB_CACHE" in environ:
        origin = "HUGGINGFACE_HUB_CACHE"
    elif "HF_HOME" in environ:
        origin = "HF_HOME, its hub folder"
    elif "XDG_CACHE_HOME" in environ:
        origin = "XDG_CACHE_HOME, its huggingface/hub folder"
    else:
        origin = "the default ~/.cache/huggingface/hub"
    return Path(hub_paths(environ)["HF_HUB_CACHE"]).absolute(), origin


def read_hub_cache(
    hub_dir: Path, origin: str, repo_id: str, repo_type: str, revision: str
) -> tuple[RepoSource, bool]:
    """One revision of ``repo_id`` in the hub cache ``hub_dir``: a ref name (``refs/<revision>``)
    or a 40-hex commit (``snapshots/<commit>``). Also returns whether ``revision`` was a ref."""
    where = f"the hub cache {hub_dir} (from {origin})"
    if not hub_dir.is_dir():
        raise RepoSourceError(
            f"{where} does not exist: pass hub_cache_dir= (a folder holding models--<org>--<name>"
            " folders), or set HF_HUB_CACHE or HF_HOME as huggingface_hub reads them"
        )
    folder = hub_dir / repo_folder_name(repo_id, repo_type)
    if not folder.is_dir():
        raise RepoSourceError(_missing_repo(hub_dir, where, repo_id, repo_type))
    label = f"{repo_id}@{revision} in {where}"
    ref = folder / "refs" / revision
    is_ref = ref.is_file()
    if is_ref:
        commit = ref.read_text().strip()
        if not is_commit(commit):
            raise RepoSourceError(
                f"refs/{revision} of {label} holds {commit!r}, not a commit: the ref is empty or"
                " being written (a partial snapshot); expected the 40-hex commit"
            )
    elif is_commit(revision) and (folder / "snapshots" / revision).is_dir():
        commit = revision
    else:
        raise RepoSourceError(_missing_revision(folder, f"{repo_id} in {where}", revision))
    snapshot = folder / "snapshots" / commit
    if not snapshot.is_dir():
        raise RepoSourceError(
            f"{label} is a partial snapshot: refs/{revision} names commit {commit}, but"
            f" snapshots/{commit} is missing; download the revision again, or pick another"
        )
    files = _snapshot_files(folder, snapshot, label)
    if not files:
        raise RepoSourceError(f"{label} has no files: snapshots/{commit} is empty")
    # A download links its pointer only once the blob is whole: an unfinished blob that no
    # other revision's pointer names may be a file this snapshot still lacks.
    others = _linked_etags(folder / "snapshots", skip=commit)
    unfinished = sorted(
        path.name
        for path in (folder / "blobs").glob(f"*{_INCOMPLETE}")
        if path.name.split(".", 1)[0] not in others
    )
    if unfinished:
        raise RepoSourceError(
            f"{label} is a partial snapshot: a download into it has not finished"
            f" (blobs/{', blobs/'.join(unfinished)}), so its snapshot may lack that file;"
            f" finish it (hf download {repo_id} --revision {revision}) or remove the"
            " .incomplete file"
        )
    return RepoSource(files=files, commit=commit, no_exist=_no_exist(folder, commit)), is_ref


def _no_exist(folder: Path, commit: str) -> tuple[str, ...]:
    """The files the revision is known to lack: huggingface_hub's ``.no_exist/<commit>``."""
    no_exist = folder / ".no_exist" / commit
    return tuple(
        sorted(
            path.relative_to(no_exist).as_posix()
            for path in (no_exist.rglob("*") if no_exist.is_dir() else ())
            if path.is_file()
        )
    )


def _snapshot_files(folder: Path, snapshot: Path, label: str) -> dict[str, SourceFile]:
    blobs = os.path.realpath(folder / "blobs")
    files: dict[str, SourceFile] = {}
    for dirpath, _dirnames, filenames in os.walk(snapshot):
        for name in sorted(filenames):
            pointer = Path(dirpath) / name
            filename = pointer.relative_to(snapshot).as_posix()
            real = os.path.realpath(pointer)
            if not os.path.isfile(real):
                raise RepoSourceError(_dangling(folder, pointer, filename, label))
            if real.endswith(_INCOMPLETE):
                raise RepoSourceError(
                    f"{label} is a partial snapshot: {filename} points at {real}, a download"
                    " that has not finished; finish it or pick another revision"
                )
            if pointer.is_symlink() and os.path.dirname(real) == blobs:
                etag = os.path.basename(real)  # the blob's name is its etag
            else:  # a cache written without symlinks holds the files themselves
                etag = file_etag(Path(real), filename)
            files[validate_filename(filename)] = SourceFile(Path(real), etag)
    return files


def _linked_etags(snapshots: Path, skip: str) -> set[str]:
    """The blob names the pointers of every snapshot but ``skip`` link to."""
    etags: set[str] = set()
    for commit in os.listdir(snapshots):
        if commit == skip:
            continue
        for dirpath, _dirnames, filenames in os.walk(snapshots / commit):
            for name in filenames:
                pointer = os.path.join(dirpath, name)
                if os.path.islink(pointer):
                    etags.add(os.path.basename(os.readlink(pointer)))
    return etags


def _dangling(folder: Path, pointer: Path, filename: str, label: str) -> str:
    target = os.readlink(pointer) if pointer.is_symlink() else str(pointer)
    blob = os.path.basename(target)
    unfinished = sorted(path.name for path in (folder / "blobs").glob(f"{blob}*{_INCOMPLETE}"))
    why = (
        f" (its download has not finished: blobs/{unfinished[0]})"
        if unfinished
        else " (removed by a cache cleaner, or never downloaded)"
    )
    return (
        f"{label} is a partial snapshot: {filename} is missing, its pointer"
        f" {pointer.relative_to(folder)} links to {target}, which does not exist{why};"
        " download the revision again, or pick another"
    )


def _missing_repo(hub_dir: Path, where: str, repo_id: str, repo_type: str) -> str:
    import difflib  # only when there is an error to explain

    present = repos_in(hub_dir)
    names = [f"{rid} ({kind})" if kind != "model" else rid for rid, kind in present]
    close = difflib.get_close_matches(repo_id, [rid for rid, _ in present], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if not present and (hub_dir / "hub").is_dir():
        hint = f" ({hub_dir} looks like HF_HOME: its hub cache is {hub_dir / 'hub'})"
    listed = ", ".join(names[:_LISTED]) or "none"
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return (
        f"{repo_type} repo {repo_id!r} is not in {where}: no"
        f" {repo_folder_name(repo_id, repo_type)} folder{hint}. Repos there: {listed}{more}."
        f" Download it first (hf download {repo_id}), or pass the hub_cache_dir= that holds it"
    )


def repos_in(hub_dir: Path) -> list[tuple[str, str]]:
    """``(repo_id, repo_type)`` of every repo folder in a hub cache, sorted."""
    found: list[tuple[str, str]] = []
    prefixes = {f"{kind}s": kind for kind in REPO_TYPES}
    for entry in sorted(os.listdir(hub_dir)):
        prefix, _, rest = entry.partition("--")
        if prefix in prefixes and rest and (hub_dir / entry).is_dir():
            found.append((rest.replace("--", "/"), prefixes[prefix]))
    return found


def _missing_revision(folder: Path, repo: str, revision: str) -> str:
    refs_dir = folder / "refs"
    refs = sorted(
        path.relative_to(refs_dir).as_posix()
        for path in (refs_dir.rglob("*") if refs_dir.is_dir() else ())
        if path.is_file()
    )
    snapshots_dir = folder / "snapshots"
    snapshots = sorted(os.listdir(snapshots_dir)) if snapshots_dir.is_dir() else []

    def listed(names: list[str]) -> str:
        more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
        return (", ".join(names[:_LISTED]) or "none") + more

    return (
        f"revision {revision!r} is not in {repo}: no refs/{revision} and no"
        f" snapshots/{revision}. Refs there: {listed(refs)}; snapshots: {listed(snapshots)}."
        " Expected a ref name or the 40-hex commit of a snapshot"
    )


def validate_cache_revision(revision: object) -> str:
    """A ref name (``main``, ``v2``) or a 40-hex commit: what ``add_from_cache`` accepts."""
    if isinstance(revision, str) and is_commit(revision):
        return revision
    try:
        return validate_revision(revision)
    except ValueError:
        raise InvalidArgumentError(
            f"invalid revision {revision!r} in add_from_cache(): expected a branch or tag name"
            " such as 'main' or 'v2', or the 40-hex commit of a snapshot"
        ) from None
