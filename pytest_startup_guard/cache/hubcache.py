"""``FakeHubCache``: a Hugging Face hub cache on disk that the real libraries cannot tell apart.

Layout (huggingface_hub 2.4)::

    <root>/                         HF_HOME
      .startup_guard_cache          marker: the plugin created this root
      hub/                          HF_HUB_CACHE
        models--<org>--<name>/
          blobs/<etag>
          refs/<revision>           40-hex commit, no trailing newline
          snapshots/<commit>/<path> -> ../../blobs/<etag>
          .no_exist/<commit>/<path>
        .locks/models--<org>--<name>/
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_startup_guard.cache.content import encode_content
from pytest_startup_guard.cache.corruptions import CorruptionTarget, get_corruption
from pytest_startup_guard.cache.layout import (
    LFS_THRESHOLD_BYTES,
    REPO_TYPES,
    FileContent,
    atomic_link_or_copy,
    atomic_symlink,
    atomic_write,
    checked_names,
    commit_for,
    etag_for,
    file_of,
    repo_folder_name,
    validate_filename,
    validate_repo_id,
    validate_repo_type,
    validate_revision,
)
from pytest_startup_guard.cache.sources import (
    RepoSource,
    read_folder,
    read_hub_cache,
    resolve_hub_cache,
    validate_cache_revision,
)
from pytest_startup_guard.checks import instance, texts, whole_number
from pytest_startup_guard.checks import path as checked_path
from pytest_startup_guard.errors import (
    InvalidArgumentError,
    NotInCacheError,
    StartupGuardError,
    UnsafeCacheError,
)
from pytest_startup_guard.lifetimes import lives_for_its_test
from pytest_startup_guard.runtime.observation import unobserved

MARKER_NAME = ".startup_guard_cache"
MAX_MARKER_BYTES = 4096  # the marker FakeHubCache writes is some 60 bytes
BUILD_LOG_NAME = ".startup_guard_builds"
_LOCKS_DIR_NAME = ".startup_guard_locks"


@dataclass(frozen=True)
class AppliedCorruption:
    """A corruption ``FakeHubCache.corrupt`` wrote (kept for the report)."""

    repo_id: str
    revision: str
    filename: str
    kind: str
    path: Path  # what changed on disk


@dataclass(frozen=True)
class CachedRepo:
    """One revision of one repo in a ``FakeHubCache``."""

    cache: FakeHubCache = field(repr=False)
    repo_id: str
    repo_type: str
    revision: str
    commit: str
    files: Mapping[str, str] = field(repr=False)  # file name -> etag

    @property
    def folder_name(self) -> str:
        return repo_folder_name(self.repo_id, self.repo_type)

    @property
    def path(self) -> Path:
        """The repo's folder: ``<hub>/models--org--name``."""
        return self.cache.hub_dir / self.folder_name

    @property
    def shared(self) -> bool:
        return self.cache.shared

    def _etag(self, filename: str) -> str:
        name = validate_filename(filename)
        owner = f"{self.repo_id}@{self.revision}"
        return file_of(self.files, name, owner, NotInCacheError, given=filename)

    def pointer(self, filename: str) -> Path:
        """``snapshots/<commit>/<filename>``: the symlink readers open."""
        self._etag(filename)
        return self.path / "snapshots" / self.commit / validate_filename(filename)

    def blob(self, filename: str) -> Path:
        """``blobs/<etag>``: the content behind ``filename``."""
        return self.path / "blobs" / self._etag(filename)

    def ref(self, revision: str | None = None) -> Path:
        """``refs/<revision>``: the file that maps a branch or tag to its commit."""
        return (
            self.path / "refs" / validate_revision(self.revision if revision is None else revision)
        )

    def lock(self, filename: str) -> Path:
        """``.locks/<repo folder>/<etag>.lock``: what huggingface_hub locks while downloading."""
        return self.cache.hub_dir / ".locks" / self.folder_name / f"{self._etag(filename)}.lock"

    def no_exist(self, filename: str) -> Path:
        return self.path / ".no_exist" / self.commit / validate_filename(filename)

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.revision}"


@lives_for_its_test
class FakeHubCache:
    """A hub cache under ``root`` that only this plugin writes to.

    ``root`` is used as ``HF_HOME``; the hub cache proper is ``root / "hub"`` (``hub_dir``).
    A root that exists, is not empty and carries no marker of this plugin is refused, so that
    a typo can never turn a real cache into a test fixture.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        shared: bool = False,
        lfs_threshold: int = LFS_THRESHOLD_BYTES,
    ) -> None:
        self.root = Path(checked_path("root", root, "FakeHubCache()")).absolute()
        whole_number("lfs_threshold", lfs_threshold, "FakeHubCache()", meaning="bytes")
        self.hub_dir = self.root / "hub"
        self.lfs_threshold = lfs_threshold
        marker = self.root / MARKER_NAME
        if marker.is_file():
            recorded = _read_marker(marker)
            if bool(recorded.get("shared")) != shared:
                kind = "shared" if recorded.get("shared") else "private"
                raise UnsafeCacheError(
                    f"{self.root} is a {kind} fake cache; open it with shared={not shared}"
                )
        elif self.root.exists() and any(self.root.iterdir()):
            raise UnsafeCacheError(
                f"refusing to use {self.root} as a fake hub cache: it exists, is not empty and"
                f" has no {MARKER_NAME} marker, so pytest-startup-guard did not create it."
                " Pass a new or empty folder (tmp_path works), or use the hub_cache fixture."
            )
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write(
                marker,
                json.dumps({"created_by": "pytest-startup-guard", "shared": shared}).encode(),
            )
        self.shared = shared
        self.corruptions: list[AppliedCorruption] = []  # what corrupt() wrote, in order
        (self.hub_dir / ".locks").mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"FakeHubCache({str(self.root)!r}, shared={self.shared})"

    @classmethod
    def existing(cls, root: str | os.PathLike[str] | None) -> FakeHubCache | None:
        """The fake cache this plugin made at ``root``, opened as its marker says (shared or
        not); None where there is none (no such folder, no marker, an unreadable one)."""
        if not root:
            return None
        marker = Path(root) / MARKER_NAME
        try:
            if not marker.is_file():
                return None
            recorded = _read_marker(marker)
            return cls(root, shared=bool(recorded["shared"]))
        except (OSError, StartupGuardError):
            return None

    # -- environment -------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """What a child process needs to read this cache offline and nothing else."""
        hub = str(self.hub_dir)
        return {
            "HF_HOME": str(self.root),
            "HF_HUB_CACHE": hub,
            "HUGGINGFACE_HUB_CACHE": hub,
            "HF_ASSETS_CACHE": str(self.root / "assets"),
            "HF_XET_CACHE": str(self.root / "xet"),
            "HF_MODULES_CACHE": str(self.root / "modules"),
            "HF_DATASETS_CACHE": str(self.root / "datasets"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "DISABLE_TELEMETRY": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            # No real token reaches a test; the library still looks for $HF_HOME/token as usual.
            "HF_TOKEN": "",
            "HUGGING_FACE_HUB_TOKEN": "",
        }

    # -- building ----------------------------------------------------------------------------

    def add_model(
        self,
        repo_id: str,
        files: Mapping[str, FileContent],
        revision: str = "main",
        *,
        no_exist: Iterable[str] = (),
    ) -> CachedRepo:
        """Add (or extend) a model repo; ``files`` maps names to JSON values, str or bytes."""
        return self.add_repo(repo_id, files, revision, repo_type="model", no_exist=no_exist)

    def add_dataset(
        self,
        repo_id: str,
        files: Mapping[str, FileContent],
        revision: str = "main",
        *,
        no_exist: Iterable[str] = (),
    ) -> CachedRepo:
        return self.add_repo(repo_id, files, revision, repo_type="dataset", no_exist=no_exist)

    def add_repo(
        self,
        repo_id: str,
        files: Mapping[str, FileContent],
        revision: str = "main",
        *,
        repo_type: str = "model",
        no_exist: Iterable[str] = (),
    ) -> CachedRepo:
        validate_repo_id(repo_id)
        validate_repo_type(repo_type)
        validate_revision(revision)
        if not isinstance(files, Mapping) or not files:
            raise InvalidArgumentError(
                f"invalid files for {repo_id!r}: expected a non-empty mapping of file name to"
                " content (dict/list as JSON, str or bytes)"
            )
        owner = repr(repo_id)
        given_as = checked_names(files, owner)  # normalised name -> as given
        contents = {
            name: encode_content(given, files[given], owner) for name, given in given_as.items()
        }
        names = texts("no_exist", no_exist, f"add_repo({repo_id!r}, ...)", meaning="file names")
        missing = sorted({validate_filename(name) for name in names})
        etags = {name: etag_for(name, data, self.lfs_threshold) for name, data in contents.items()}
        commit = commit_for(repo_type, repo_id, etags)
        repo = CachedRepo(self, repo_id, repo_type, revision, commit, dict(etags))

        def write_blob(name: str, blob: Path) -> None:
            data = contents[name]
            if not blob.is_file() or blob.stat().st_size != len(data):
                atomic_write(blob, data)  # blobs are shared between revisions: stored once

        with unobserved():
            self._build(repo, write_blob, missing)
        return repo

    def add_from_folder(
        self,
        repo_id: str,
        folder: str | os.PathLike[str],
        *,
        revision: str = "main",
        repo_type: str = "model",
    ) -> CachedRepo:
        """Add a repo whose files are those of a local ``folder`` (``save_pretrained``'s output,
        a checkout, ``hf download --local-dir``), nested ones too; ``.git`` and
        ``.cache/huggingface`` are skipped. Etags are hashed as the hub does; the commit derives
        from the content, as for ``add_model``. The folder is only read: blobs are hard links
        to its files (copies across file systems), and copy on write keeps every later
        in-place write away from them."""
        validate_repo_id(repo_id)
        validate_repo_type(repo_type)
        validate_revision(revision)
        where = f"add_from_folder({repo_id!r}, ...)"
        with unobserved():
            source = read_folder(folder, where, self.lfs_threshold)
            commit = commit_for(repo_type, repo_id, source.etags)
            return self._add_source(repo_id, repo_type, revision, commit, source)

    def add_from_cache(
        self,
        repo_id: str,
        hub_cache_dir: str | os.PathLike[str] | None = None,
        *,
        revision: str = "main",
        repo_type: str = "model",
    ) -> CachedRepo:
        """Add one revision of a repo from a real hub cache: ``hub_cache_dir``, by default the
        user's (as huggingface_hub finds it, from the environment before the fake caches' env
        was applied). ``revision`` is a ref name (``refs/<revision>``, kept as the fake repo's
        revision) or a 40-hex commit (``snapshots/<commit>``; the fake ``refs/main`` names it).
        The commit, the etags and ``.no_exist`` entries are the source's; the source is only
        read (blobs hard-linked or copied, pointers and refs of this cache's own)."""
        validate_repo_id(repo_id)
        validate_repo_type(repo_type)
        validate_cache_revision(revision)
        hub_dir, origin = resolve_hub_cache(hub_cache_dir)
        with unobserved():
            source, is_ref = read_hub_cache(hub_dir, origin, repo_id, repo_type, revision)
            assert source.commit is not None
            ref_name = revision if is_ref else "main"
            return self._add_source(repo_id, repo_type, ref_name, source.commit, source)

    def _add_source(
        self, repo_id: str, repo_type: str, revision: str, commit: str, source: RepoSource
    ) -> CachedRepo:
        repo = CachedRepo(self, repo_id, repo_type, revision, commit, source.etags)

        def link_blob(name: str, blob: Path) -> None:
            original = source.files[name].path
            if blob.is_file() and blob.stat().st_size == original.stat().st_size:
                return  # already here (another revision, or added before): stored once
            atomic_link_or_copy(original, blob)

        self._build(repo, link_blob, list(source.no_exist))
        return repo

    def _build(
        self, repo: CachedRepo, write_blob: Callable[[str, Path], None], missing: list[str]
    ) -> None:
        """Write ``repo`` unless its snapshot is already whole; shared caches lock and log."""
        with self._repo_lock(repo.folder_name):
            if not _snapshot_complete(repo, missing):
                self._write_repo(repo, write_blob, missing)
                if self.shared:
                    self._log_build(repo)

    def _write_repo(
        self, repo: CachedRepo, write_blob: Callable[[str, Path], None], missing: list[str]
    ) -> None:
        for sub in ("blobs", "refs", f"snapshots/{repo.commit}"):
            (repo.path / sub).mkdir(parents=True, exist_ok=True)
        (self.hub_dir / ".locks" / repo.folder_name).mkdir(parents=True, exist_ok=True)
        for name in repo.files:
            blob = repo.path / "blobs" / repo.files[name]
            write_blob(name, blob)
            pointer = repo.pointer(name)
            pointer.parent.mkdir(parents=True, exist_ok=True)
            atomic_symlink(pointer, blob)
        for name in missing:
            marker = repo.path / ".no_exist" / repo.commit / name
            marker.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(marker, b"")
        atomic_write(repo.ref(), repo.commit.encode())

    @contextmanager
    def _repo_lock(self, folder_name: str) -> Iterator[None]:
        """Serialise builders of one repo across xdist workers (shared caches only)."""
        if not self.shared:
            yield
            return
        from filelock import FileLock  # only shared caches need it; keeps plugin import cheap

        locks = self.root / _LOCKS_DIR_NAME
        locks.mkdir(exist_ok=True)
        with FileLock(str(locks / f"{folder_name}.lock")):
            yield

    def _log_build(self, repo: CachedRepo) -> None:
        line = f"{os.getpid()} {time.time():.6f} {repo.repo_type} {repo.repo_id} {repo.revision} {repo.commit}\n"
        with open(self.root / BUILD_LOG_NAME, "a") as log:
            log.write(line)

    def builds(self) -> list[str]:
        """One line per repo revision this (shared) cache actually wrote, across workers."""
        log = self.root / BUILD_LOG_NAME
        return log.read_text().splitlines() if log.is_file() else []

    # -- looking up --------------------------------------------------------------------------

    def repo(self, repo_id: str, revision: str = "main", *, repo_type: str = "model") -> CachedRepo:
        """The ``CachedRepo`` of a revision already on disk (read back from the layout)."""
        validate_repo_id(repo_id)
        validate_repo_type(repo_type)
        folder = self.hub_dir / repo_folder_name(repo_id, repo_type)
        ref = folder / "refs" / validate_revision(revision)
        if not ref.is_file():
            held = ", ".join(_revisions(self.hub_dir)) or "none"
            raise NotInCacheError(
                f"{repo_id}@{revision} is not in {self.hub_dir}; repos there: {held}"
            )
        commit = ref.read_text()
        return CachedRepo(self, repo_id, repo_type, revision, commit, _read_etags(folder, commit))

    # -- faults --------------------------------------------------------------------------------

    def check_writable(self, repo: CachedRepo, action: str) -> None:
        """Refuse fault injection on anything but a private cache this plugin created."""
        cache = repo.cache
        if cache.shared:
            raise UnsafeCacheError(
                f"refusing to {action} {repo}: it belongs to shared_hub_cache, which every test"
                " (and every xdist worker) reads. Take a private copy first:"
                " repo = hub_cache.copy_of(repo)"
            )
        if not (cache.root / MARKER_NAME).is_file():
            raise UnsafeCacheError(
                f"refusing to {action} {repo}: {cache.root} has no {MARKER_NAME} marker, so"
                " pytest-startup-guard did not create it"
            )
        real_root = os.path.realpath(cache.hub_dir)
        real_repo = os.path.realpath(repo.path)
        if os.path.commonpath([real_root, real_repo]) != real_root:
            raise UnsafeCacheError(
                f"refusing to {action} {repo}: {real_repo} is outside the fake cache {real_root}"
            )

    def corrupt(
        self, repo: CachedRepo, filename: str, kind: str, revision: str | None = None
    ) -> Path:
        """Write the persistent corruption ``kind`` (see ``CORRUPTIONS``) into ``filename``.

        Returns the path that was changed. ``revision`` defaults to the repo's own revision.
        """
        corruption = get_corruption(kind, where="cache.corrupt()")
        _checked_repo(repo, "cache.corrupt()")
        self.check_writable(repo, f"corrupt {filename!r} of")
        target = corruption_target(repo, filename, revision)
        with unobserved():
            corruption.apply(target)
        changed: Path = getattr(target, corruption.changes)
        self.corruptions.append(
            AppliedCorruption(repo.repo_id, revision or repo.revision, filename, kind, changed)
        )
        return changed

    # -- per-test copies -------------------------------------------------------------------

    def copy_of(self, repo: CachedRepo) -> CachedRepo:
        """A private copy of ``repo`` (every revision) in this cache: blobs and pointers
        hard-linked, refs and ``.no_exist`` entries copied. The plugin's writes to it (copy on
        write) never reach the original."""
        _checked_repo(repo, "hub_cache.copy_of()")
        with unobserved():
            return self._copy_of(repo)

    def _copy_of(self, repo: CachedRepo) -> CachedRepo:
        if self.shared:
            raise UnsafeCacheError(
                "copy_of() makes a private copy; call it on hub_cache, not on shared_hub_cache"
            )
        destination = self.hub_dir / repo.folder_name
        if destination.exists():
            raise StartupGuardError(f"{repo.repo_id} is already in {self.hub_dir}; copy it once")
        self._copy_repo_folder(repo.path, destination)
        return CachedRepo(
            self, repo.repo_id, repo.repo_type, repo.revision, repo.commit, repo.files
        )

    def _copy_repo_folder(self, source: Path, destination: Path) -> None:
        """Blobs and pointers hard-linked, refs and ``.no_exist`` entries copied."""
        destination.mkdir(parents=True)
        for name in ("blobs", "snapshots"):
            if (source / name).is_dir():
                _hard_link_tree(source / name, destination / name)
        for name in ("refs", ".no_exist"):  # small files users may edit: real copies
            if (source / name).is_dir():
                shutil.copytree(source / name, destination / name, symlinks=True)
        (self.hub_dir / ".locks" / destination.name).mkdir(parents=True, exist_ok=True)

    def clone(self, root: str | os.PathLike[str]) -> FakeHubCache:
        """A private cache at ``root`` (new or empty) holding a copy of every repo of this one,
        as ``copy_of`` copies one: what a process needs to race a cache no other process reads
        (``server_fleet.explore`` gives each member one). A shared cache may be cloned too."""
        checked_path("root", root, "clone()")
        with unobserved():
            clone = FakeHubCache(root)
            for folder in sorted(self.hub_dir.iterdir()):
                if folder.is_dir() and folder.name.split("--")[0] in _REPO_FOLDER_PREFIXES:
                    clone._copy_repo_folder(folder, clone.hub_dir / folder.name)
            return clone

    # -- inspection ------------------------------------------------------------------------

    def listing(self) -> list[dict[str, Any]]:
        """Every entry under the hub folder: path, kind, link target, size (for artifacts)."""
        with unobserved():  # the plugin's look, not an access of the code under test
            return self._listing()

    def _listing(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        for dirpath, dirnames, filenames in os.walk(self.hub_dir):
            for name in sorted(dirnames + filenames):
                path = Path(dirpath) / name
                relative = str(path.relative_to(self.hub_dir))
                if path.is_symlink():
                    target = os.readlink(path)
                    size = path.stat().st_size if path.exists() else None
                    entries.append(
                        {"path": relative, "kind": "link", "target": target, "size": size}
                    )
                elif path.is_dir():
                    entries.append({"path": relative, "kind": "dir"})
                else:
                    entries.append({"path": relative, "kind": "file", "size": path.stat().st_size})
        return entries


def corruption_target(repo: CachedRepo, filename: str, revision: str | None) -> CorruptionTarget:
    name = validate_filename(filename)
    rev = validate_revision(revision or repo.revision)
    if rev == repo.revision:
        commit, etags = repo.commit, repo.files
    else:
        ref = repo.path / "refs" / rev
        if not ref.is_file():
            held = ", ".join(sorted(p.name for p in (repo.path / "refs").glob("*"))) or "none"
            raise NotInCacheError(
                f"{repo.repo_id} has no revision {rev!r} in {repo.cache.hub_dir}; its"
                f" revisions: {held}"
            )
        commit = ref.read_text()
        etags = _read_etags(repo.path, commit)
    if name not in etags:
        known = ", ".join(sorted(etags)) or "none"
        raise NotInCacheError(f"{repo.repo_id}@{rev} has no file {filename!r}; its files: {known}")
    return CorruptionTarget(
        label=f"{name} of {repo.repo_id}@{rev}",
        pointer=repo.path / "snapshots" / commit / name,
        blob=repo.path / "blobs" / etags[name],
        ref=repo.path / "refs" / rev,
        no_exist=repo.path / ".no_exist" / commit / name,
    )


_REPO_FOLDER_PREFIXES = tuple(f"{kind}s" for kind in REPO_TYPES)  # models--org--name


def _hard_link_tree(source: Path, destination: Path) -> None:
    """Mirror ``source`` with hard links: blobs share their inode with the original (copy on
    write breaks it before any in-place write); pointers are hard links to the symlinks
    themselves, so their relative targets resolve inside the copy."""
    destination.mkdir()
    with os.scandir(source) as entries:
        for entry in entries:
            target = destination / entry.name
            if entry.is_dir(follow_symlinks=False):
                _hard_link_tree(Path(entry.path), target)
            elif not entry.name.endswith(".incomplete"):
                try:
                    os.link(entry.path, target, follow_symlinks=False)
                except (OSError, NotImplementedError):
                    if entry.is_symlink():
                        os.symlink(os.readlink(entry.path), target)
                    else:
                        shutil.copy2(entry.path, target)


def _snapshot_complete(repo: CachedRepo, missing: list[str]) -> bool:
    try:
        if repo.ref().read_text() != repo.commit:
            return False
    except OSError:
        return False
    if not all(repo.pointer(name).is_file() for name in repo.files):
        return False
    return all((repo.path / ".no_exist" / repo.commit / name).is_file() for name in missing)


def _read_etags(folder: Path, commit: str) -> dict[str, str]:
    snapshot = folder / "snapshots" / commit
    etags: dict[str, str] = {}
    for dirpath, _dirs, names in os.walk(snapshot):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink():
                etags[str(path.relative_to(snapshot).as_posix())] = os.path.basename(
                    os.readlink(path)
                )
    return etags


def _read_marker(marker: Path) -> dict[str, Any]:
    """The marker's fields, checked before one is read: what ``FakeHubCache`` writes,
    ``{"created_by": "pytest-startup-guard", "shared": true or false}``, in a regular file of
    at most ``MAX_MARKER_BYTES`` (opened without blocking: a FIFO swapped in is refused)."""
    expected = '{"created_by": "pytest-startup-guard", "shared": true or false}'
    try:
        descriptor = os.open(marker, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ValueError("not a regular file")
            raw = handle.read(MAX_MARKER_BYTES + 1)
        if len(raw) > MAX_MARKER_BYTES:
            raise ValueError(f"over {MAX_MARKER_BYTES} bytes")
        data = json.loads(raw, parse_constant=_not_json)
    except (OSError, ValueError, RecursionError) as error:
        raise UnsafeCacheError(
            f"unreadable marker {marker}: {error}; expected {expected}"
        ) from None
    if (
        not isinstance(data, dict)
        or data.get("created_by") != "pytest-startup-guard"
        or type(data.get("shared")) is not bool
    ):
        found = repr(data)[:80]
        raise UnsafeCacheError(f"unreadable marker {marker}: expected {expected}, found {found}")
    return data


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _checked_repo(repo: object, where: str) -> CachedRepo:
    """``repo`` if it is a ``CachedRepo``: a repo id names no cache, so it is not taken."""
    return instance(
        "repo",
        repo,
        CachedRepo,
        where,
        "a CachedRepo (what hub_cache.add_model() or hub_cache.repo(repo_id) returns)",
    )


def _revisions(hub_dir: Path) -> list[str]:
    """``org/name@main`` for every ref of every repo in ``hub_dir`` (for messages)."""
    found = []
    for ref in sorted(hub_dir.glob("*--*/refs/*")):
        kind, _, name = ref.parent.parent.name.partition("--")
        found.append(
            f"{name.replace('--', '/')}@{ref.name}"
            + ("" if kind == "models" else f" ({kind[:-1]})")
        )
    return found
