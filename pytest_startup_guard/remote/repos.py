"""The repos a ``HubRemote`` serves: commits, branches and files, as the Hub stores them.

A commit is immutable: its files (name -> bytes), its parent, and a 40-hex id derived from
them only, so a test's seed never changes it and two runs give the same commit. A repo's first
commit on a branch has the id ``FakeHubCache.add_model`` gives the same files
(``layout.commit_for``), so a warm ``hub_cache`` built from the same files already holds the
remote's commit; a later commit (``push``) hashes its parent in too.

Every file has the git blob sha1 of its bytes (the ``oid`` of the tree listing). A file the
fake cache would store with Git LFS (``layout.is_lfs``: an LFS suffix or more than the cache's
``lfs_threshold`` bytes) is LFS here too: its etag is the sha256 of its bytes, the name
huggingface_hub gives its blob; other files' etag is the git blob sha1. A download therefore
writes exactly the blob names ``FakeHubCache`` writes.

The store is shared by the test (which adds and pushes) and the server's threads (which read):
every change replaces whole immutable objects under one lock.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pytest_startup_guard.cache.content import encode_content
from pytest_startup_guard.cache.layout import (
    LFS_THRESHOLD_BYTES,
    checked_names,
    commit_for,
    file_of,
    folder_clash,
    git_blob_sha1,
    is_commit,
    is_lfs,
    validate_filename,
    validate_repo_id,
    validate_revision,
)
from pytest_startup_guard.checks import shown, texts
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError


@dataclass(frozen=True)
class RemoteCommit:
    """One commit of a repo the remote serves: what ``add_model`` and ``push`` return."""

    repo_id: str
    commit: str  # 40 hex
    files: Mapping[str, bytes] = field(repr=False)
    parent: str | None = None
    repo_type: str = "model"
    lfs_threshold: int = field(default=LFS_THRESHOLD_BYTES, repr=False)

    def _data(self, filename: str) -> bytes:
        return file_of(
            self.files, filename, f"{self.repo_id}@{self.commit[:8]}", InvalidArgumentError
        )

    def is_lfs(self, filename: str) -> bool:
        """Whether the Hub stores ``filename`` with Git LFS (its blob is named by sha256)."""
        return is_lfs(filename, len(self._data(filename)), self.lfs_threshold)

    def etag(self, filename: str) -> str:
        """What huggingface_hub names the blob of ``filename``: sha256 for LFS, else the git
        blob sha1."""
        data = self._data(filename)
        if self.is_lfs(filename):
            return hashlib.sha256(data).hexdigest()
        return git_blob_sha1(data)

    def oid(self, filename: str) -> str:
        """The git blob id (the tree listing's ``oid``, the ``ETag`` of an LFS file's redirect):
        of the bytes, or for an LFS file of its pointer file, as git stores it."""
        if self.is_lfs(filename):
            return git_blob_sha1(self.lfs_pointer(filename))
        return git_blob_sha1(self._data(filename))

    def lfs_pointer(self, filename: str) -> bytes:
        """The Git LFS pointer file git holds in place of an LFS file's bytes."""
        data = self._data(filename)
        sha256 = hashlib.sha256(data).hexdigest()
        return (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n"
        ).encode()


@dataclass(frozen=True)
class RemoteRepo:
    """A repo: its commits by id and its branches (name -> commit id)."""

    repo_id: str
    repo_type: str
    commits: Mapping[str, RemoteCommit]
    branches: Mapping[str, str]

    def resolve(self, revision: str) -> RemoteCommit | None:
        """The commit ``revision`` names: a branch, or a commit id of this repo."""
        if revision in self.branches:
            return self.commits[self.branches[revision]]
        return self.commits.get(revision) if is_commit(revision) else None


class NotOnRemote(Exception):
    """What a request asked for and the remote lacks: ``kind`` is the Hub's ``X-Error-Code``
    (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``), ``message`` its
    ``X-Error-Message``; ``commit`` the revision's commit where it was found (the Hub sends it
    as ``X-Repo-Commit`` with an ``EntryNotFound``, and huggingface_hub caches the miss under
    ``.no_exist/<commit>/``)."""

    def __init__(self, kind: str, message: str, commit: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.commit = commit


def checked_files(files: object, where: str, *, empty: bool = False) -> dict[str, bytes]:
    """``files`` as ``FakeHubCache.add_model`` takes them (name -> dict/list as JSON, str or
    bytes), encoded; names are relative paths inside the repo."""
    if not isinstance(files, Mapping):
        raise ArgumentTypeError(
            f"invalid files={shown(files)} for {where}: expected a mapping of file name to"
            " content (a dict or list written as JSON, a str or bytes)"
        )
    if not files and not empty:
        raise InvalidArgumentError(
            f"invalid files={{}} for {where}: expected at least one file (name -> content)"
        )
    try:
        names = checked_names(files, "the repo")
        return {name: encode_content(given, files[given]) for name, given in names.items()}
    except InvalidArgumentError as error:
        raise _in_where(where, error) from None


def _in_where(where: str, error: InvalidArgumentError) -> InvalidArgumentError:
    """The same error, saying where the bad value was given."""
    return type(error)(f"{error} (given to {where})")


def _checked(where: str, check: Callable[[object], str], value: object) -> str:
    try:
        return check(value)
    except InvalidArgumentError as error:
        raise _in_where(where, error) from None


def checked_repo_id(repo_id: object, where: str) -> str:
    return _checked(where, validate_repo_id, repo_id)


def checked_filename(filename: object, where: str) -> str:
    return _checked(where, validate_filename, filename)


def checked_revision(revision: object, where: str) -> str:
    return _checked(where, validate_revision, revision)


class RemoteRepos:
    """Every model repo the remote serves: ``add_model`` and ``push`` make commits (the test's
    side), ``resolve`` and ``file`` read them (the server's threads)."""

    def __init__(self, lfs_threshold: int = LFS_THRESHOLD_BYTES) -> None:
        self.lfs_threshold = lfs_threshold
        self._lock = threading.Lock()
        self._repos: dict[str, RemoteRepo] = {}

    def names(self) -> list[str]:
        """``org/name@branch`` of every branch of every repo (for messages)."""
        with self._lock:
            return sorted(
                f"{repo.repo_id}@{branch}"
                for repo in self._repos.values()
                for branch in repo.branches
            )

    # -- the server's side ----------------------------------------------------------------------

    def resolve(self, repo_id: str, revision: str) -> RemoteCommit:
        """The commit ``revision`` (a branch or a commit id) names in ``repo_id``;
        ``NotOnRemote`` where the remote lacks the repo or the revision."""
        with self._lock:
            repo = self._repos.get(repo_id)
        if repo is None:
            raise NotOnRemote("RepoNotFound", "Repository not found")
        commit = repo.resolve(revision)
        if commit is None:
            raise NotOnRemote("RevisionNotFound", f"Invalid rev id: {revision}")
        return commit

    def file(self, repo_id: str, revision: str, filename: str) -> tuple[RemoteCommit, bytes]:
        """The commit and the bytes of ``filename`` at ``revision``; ``NotOnRemote`` where the
        remote lacks the repo, the revision or the file."""
        commit = self.resolve(repo_id, revision)
        if filename not in commit.files:
            raise NotOnRemote("EntryNotFound", "Entry not found", commit.commit)
        return commit, commit.files[filename]

    # -- the test's side ------------------------------------------------------------------------

    def add_model(
        self, repo_id: object, files: object, revision: object, where: str
    ) -> RemoteCommit:
        """A first commit of ``files`` on the branch ``revision`` (a new repo, or a new branch
        of one). The same files on the same branch again return the same commit."""
        repo_id = _checked(where, validate_repo_id, repo_id)
        revision = _checked(where, validate_revision, revision)
        if is_commit(revision):
            raise InvalidArgumentError(
                f"invalid revision={revision!r} for {where}: expected a branch name such as"
                " 'main' (the remote derives the commit id from the files)"
            )
        contents = checked_files(files, where)
        commit = self._commit(repo_id, contents, parent=None)
        with self._lock:
            repo = self._repos.get(repo_id)
            if repo is not None and revision in repo.branches:
                if repo.branches[revision] == commit.commit:
                    return commit
                raise InvalidArgumentError(
                    f"invalid files for {where}: {repo_id}@{revision} exists with other files;"
                    f" make a new commit on it with hub_remote.push({repo_id!r}, files)"
                )
            self._store(repo_id, revision, commit, repo)
        return commit

    def push(
        self, repo_id: object, files: object, branch: object, delete: object, where: str
    ) -> RemoteCommit:
        """A new commit on ``branch``: its head's files, updated by ``files``, less ``delete``."""
        repo_id = _checked(where, validate_repo_id, repo_id)
        branch = _checked(where, validate_revision, branch)
        contents = checked_files(files, where, empty=True)
        names = texts("delete", delete, where, meaning="file names of the branch's head")
        removed = {_checked(where, validate_filename, name) for name in names}
        if not contents and not removed:
            raise InvalidArgumentError(
                f"invalid files={{}} for {where}: expected a file to add or change, or a name"
                " in delete="
            )
        with self._lock:
            repo = self._repos.get(repo_id)
            if repo is None:
                held = ", ".join(sorted(self._repos)) or "none"
                raise InvalidArgumentError(
                    f"invalid repo_id={repo_id!r} for {where}: the remote has no such repo (its"
                    f" repos: {held}); add it first: hub_remote.add_model({repo_id!r}, files)"
                )
            if branch not in repo.branches:
                raise InvalidArgumentError(
                    f"invalid branch={branch!r} for {where}: {repo_id} has no such branch (its"
                    f" branches: {', '.join(sorted(repo.branches))}); start one with"
                    f" hub_remote.add_model({repo_id!r}, files, revision={branch!r})"
                )
            head = repo.commits[repo.branches[branch]]
            unknown = sorted(removed - set(head.files))
            if unknown:
                raise InvalidArgumentError(
                    f"invalid delete={unknown!r} for {where}: not in {repo_id}@{branch} (its"
                    f" files: {', '.join(sorted(head.files))})"
                )
            merged = {name: data for name, data in head.files.items() if name not in removed}
            merged.update(contents)
            try:  # a pushed file where the head has a folder, or a folder where it has a file
                folder_clash({name: name for name in merged}, f"{repo_id}@{branch}")
            except InvalidArgumentError as error:
                raise _in_where(where, error) from None
            if not merged:
                raise InvalidArgumentError(
                    f"invalid delete={sorted(removed)!r} for {where}: a commit keeps at least"
                    " one file"
                )
            commit = self._commit(repo_id, merged, parent=head.commit)
            self._store(repo_id, branch, commit, repo)
        return commit

    def _commit(self, repo_id: str, files: Mapping[str, bytes], parent: str | None) -> RemoteCommit:
        draft = RemoteCommit(repo_id, "0" * 40, dict(files), parent, "model", self.lfs_threshold)
        commit = commit_for("model", repo_id, {name: draft.etag(name) for name in files})
        if parent is not None:
            # A push of files equal to an older commit's is still a new commit: the parent is
            # part of what a commit is.
            commit = hashlib.sha1(f"{commit}\nparent {parent}\n".encode()).hexdigest()
        return RemoteCommit(repo_id, commit, dict(files), parent, "model", self.lfs_threshold)

    def _store(
        self, repo_id: str, branch: str, commit: RemoteCommit, repo: RemoteRepo | None
    ) -> None:
        commits = dict(repo.commits) if repo else {}
        branches = dict(repo.branches) if repo else {}
        commits[commit.commit] = commit
        branches[branch] = commit.commit
        self._repos[repo_id] = RemoteRepo(repo_id, "model", commits, branches)
