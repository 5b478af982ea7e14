"""What a race works on, and the ``Race`` base every race subclasses.

A race works on a *target*: one file of one revision of a hub repo (``RaceTarget``, for the hub
races), or any file or folder under a root the plugin owns (``PathTarget``, for the generic
races and stale locks: a ``shared_dir``, a ``hub_cache``, the test's ``tmp_path``). Both tell
the engine which folder to watch and how to name themselves in messages and the report.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, Concatenate, ParamSpec, Protocol, TypeVar

from pytest_startup_guard.cache.hubcache import CachedRepo, corruption_target
from pytest_startup_guard.races.rewrite import InPlaceRewrite
from pytest_startup_guard.runtime.observation import unobserved


class HeldInProcess(Protocol):
    """A lock the test process holds for a window (filelock's ``FileLock``)."""

    def release(self) -> None: ...


class HeldByProcess(Protocol):
    """A process that holds a lock for a window (``held_locks.LockHolder``)."""

    path: Path

    def stop(self) -> bool: ...


def path_forms(path: Path) -> tuple[str, str]:
    """``path`` as given and with its folder's symlinks resolved: the two ways a process may
    name it. The resolving looks at the disk: the plugin's own look, never an access."""
    with unobserved():
        return str(path), os.path.join(os.path.realpath(path.parent), path.name)


@dataclass(eq=False)
class RaceState(MutableMapping[str, Any]):
    """What a race's ``open`` keeps for its ``close``, on its target. The built-in races keep
    typed fields, each set by ``open`` and taken back by ``close``; a race of your own keeps
    what it likes by key, as in a dict (``target.state["ours"] = ...``, ``.pop``, ``in``)."""

    content: bytes | None = None  # file_replace, dangling_pointer: the bytes to put back
    mode: int = 0o644  # file_replace: the removed file's permission bits
    link: str | None = None  # file_replace: where the removed symlink pointed
    rewrite: InPlaceRewrite | None = None  # blob_rewrite, file_rewrite, partial_write
    ref_handle: IO[str] | None = None  # ref_rewrite: the ref, opened (and so emptied)
    folder: Path | None = None  # folder_move: the folder moved aside
    aside: Path | None = None  # folder_move: where it is while the window is open
    placed: bool = False  # stale locks: the lock file was left
    siblings: list[Path] = field(default_factory=list)  # stale_soft_lock: files beside it
    lock_path: Path | None = None  # lock_held on a hub file: its download lock, found once
    held: HeldInProcess | None = None  # lock_held: the lock the test process holds
    holder: HeldByProcess | None = None  # lock_held and its stale forms: the holding process
    own: dict[str, Any] = field(default_factory=dict)  # a race of your own's keys

    def __getitem__(self, key: str) -> Any:
        return self.own[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.own[key] = value

    def __delitem__(self, key: str) -> None:
        del self.own[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.own)

    def __len__(self) -> int:
        return len(self.own)


@dataclass
class RaceTarget:
    """The paths one armed race works on: one file of one revision of a cached repo."""

    repo: CachedRepo
    filename: str
    revision: str
    commit: str
    pointer: Path
    blob: Path
    ref: Path
    lock: Path
    state: RaceState = field(default_factory=RaceState)  # what open() keeps for close()

    @classmethod
    def of(cls, repo: CachedRepo, filename: str, revision: str | None = None) -> RaceTarget:
        paths = corruption_target(repo, filename, revision)
        etag = paths.blob.name
        return cls(
            repo=repo,
            filename=filename,
            revision=revision or repo.revision,
            commit=paths.pointer.relative_to(repo.path / "snapshots").parts[0],
            pointer=paths.pointer,
            blob=paths.blob,
            ref=paths.ref,
            lock=repo.cache.hub_dir / ".locks" / repo.folder_name / f"{etag}.lock",
        )

    @property
    def label(self) -> str:
        return f"{self.filename} of {self.repo.repo_id}@{self.revision}"

    @property
    def folder(self) -> Path:
        """The folder whose accesses count for triggers: the repo's."""
        return self.repo.path

    @property
    def root(self) -> Path:
        """The plugin-owned root the target lies under: its cache's."""
        return self.repo.cache.root


@dataclass
class PathTarget:
    """A file or folder under a plugin-owned root (``root_name`` says which, for messages)."""

    path: Path
    root: Path
    root_name: str  # "shared_dir", "hub_cache", "tmp_path"
    state: RaceState = field(default_factory=RaceState)  # what open() keeps for close()
    repo: CachedRepo | None = None  # set where a generic race works on a hub repo's file
    filename: str | None = None
    revision: str | None = None

    @property
    def label(self) -> str:
        if self.repo is not None:
            return f"{self.filename} of {self.repo.repo_id}@{self.revision}"
        return f"{os.path.relpath(self.path, self.root)} under {self.root_name}"

    @property
    def folder(self) -> Path:
        """The folder whose accesses count for triggers: the one that holds the target, so a
        process that lists or opens anything beside it meets the fault at its next access; on a
        hub repo's file, the repo's folder, as for the hub races (readers stat a pointer, which
        the child runtime cannot see, after they open the ref)."""
        return self.repo.path if self.repo is not None else self.path.parent


Target = RaceTarget | PathTarget

TargetT = TypeVar("TargetT", bound=Target)
RaceT = TypeVar("RaceT", bound="Race")
Params = ParamSpec("Params")
Result = TypeVar("Result")


class Race:
    """Base class of every race. Subclass it, set ``name`` and ``models``, implement ``open``
    and ``close``; override ``watched`` and ``is_hit`` if accesses of other folders matter.

    ``close`` must make the target whole whatever state it finds (it also runs at teardown).
    A hub race (``on_paths = False``) works on a ``RaceTarget``; a generic race
    (``on_paths = True``) on a ``PathTarget``, and on a hub repo's file as the path its
    snapshot pointer has.

    The methods take a ``Target`` (either kind): whoever holds a race of unknown kind (an armed
    race, the refresher, exploration) passes the target ``on_paths`` chose. A race that works
    on one kind says so with ``@Race.takes(RaceTarget)`` (or ``PathTarget``) on each method it
    implements: the method is written for that kind, and the check of the kind is in one place.
    """

    name: ClassVar[str] = ""
    models: ClassVar[str] = ""  # the real writer and the versions or situations it models
    in_all: ClassVar[bool] = True  # included in startup_races(transient="all")
    on_paths: ClassVar[bool] = False  # works on any path (PathTarget) rather than a hub file
    stale: ClassVar[bool] = False  # a lock a dead process left: startup_races(stale=[...])
    # Seconds the real writer keeps the fault on disk (its window, measured: the figure and the
    # benchmark are cited where it is set). ``on_access()`` given no hold holds the window open
    # for it plus ``WINDOW_MARGIN``; None (a race that says nothing of its writer): 0.5 s.
    window: ClassVar[float | None] = None

    def watched(self, target: Target, /) -> tuple[Path, ...]:
        """Folders whose accesses count for triggers and may be hits."""
        return (target.folder,)

    # Whether its window removes or adds a name (a pointer, a file, a folder): then a listing
    # of the folder that holds what it changes meets the change too. False for a rewrite in
    # place, which a listing cannot see.
    changes_names: ClassVar[bool] = True
    # What an access finds while the window is open, said of what it changed (``{what}``: the
    # file's name, ``refs/main``): the words of a root-cause line ("model.safetensors gone").
    found: ClassVar[str] = "{what} as the race left it"

    def looks_meet(self) -> bool:
        """Whether a look at what it changes (``os.stat``, ``lstat``, ``access``, ``readlink``)
        meets the change: yes where the window removes or adds a name (a stat finds nothing),
        no for a rewrite in place, whose short content only a read meets."""
        return self.changes_names

    def raced_files(self, target: Target, /) -> tuple[Path, ...]:
        """What the race changes: the paths that look different while its window is open. An
        access of one of them in a window meets the change (a hit, ``is_hit``); the default
        trigger opens at each process's first access of one; a transient case passes only if
        every process that accessed one (or anything under one, for a folder) met it. By
        default a hub file's pointer and blob, a path race's path."""
        if isinstance(target, RaceTarget):
            return (target.pointer, target.blob)
        return (target.path,)

    def is_hit(self, target: Target, /, path: str) -> bool:
        """Whether an access of ``path`` meets what the race changes (``raced_files``), as
        given or through a folder that is a symlink; accesses of other files in its folders,
        made while the window is open, are not hits."""
        absolute = os.path.abspath(path)
        return any(absolute in path_forms(raced) for raced in self.raced_files(target))

    def check(self, target: Target, /) -> None:
        """Refuse, when it is armed, a target this race cannot work on (a clear error)."""

    def open(self, target: Target, /) -> None:
        raise NotImplementedError

    def close(self, target: Target, /) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @staticmethod
    def takes(
        kind: type[TargetT],
    ) -> Callable[
        [Callable[Concatenate[RaceT, TargetT, Params], Result]],
        Callable[Concatenate[RaceT, Target, Params], Result],
    ]:
        """Decorate a method written for one kind of target (``RaceTarget`` or ``PathTarget``)
        so that it takes a ``Target``, as ``Race``'s do: a target of another kind is a
        ``TypeError`` naming the race, never an ``AttributeError`` deep in its body."""
        if kind not in (RaceTarget, PathTarget):
            raise TypeError(
                f"invalid kind {kind!r} for Race.takes(): expected RaceTarget (a hub repo's"
                " file) or PathTarget (a path, for a race with on_paths = True)"
            )

        def decorate(
            method: Callable[Concatenate[RaceT, TargetT, Params], Result],
        ) -> Callable[Concatenate[RaceT, Target, Params], Result]:
            def of_kind(
                self: RaceT, target: Target, /, *args: Params.args, **kwargs: Params.kwargs
            ) -> Result:
                if not isinstance(target, kind):
                    raise TypeError(
                        f"race {self.name or type(self).__name__!r}: {method.__name__}() takes a"
                        f" {kind.__name__}, not a {type(target).__name__} (a race with"
                        " on_paths = True works on a PathTarget, any other on a RaceTarget)"
                    )
                return method(self, target, *args, **kwargs)

            functools.update_wrapper(of_kind, method)  # its name, docstring and __wrapped__
            return of_kind

        return decorate


class PathRace(Race):
    """Base of the races on any path (generic races, stale locks): they take a ``PathTarget``
    and are armed by name only (not part of ``transient="all"``, which is the hub races)."""

    in_all: ClassVar[bool] = False
    on_paths: ClassVar[bool] = True
