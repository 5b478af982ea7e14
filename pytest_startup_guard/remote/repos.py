"""The repos a loopback hub serves: commits of files, branches that move.

A commit id is derived from the repo and its files' etags (``cache/layout.commit_for``), as the
fake cache derives it: a repo the remote serves and the same files added to a ``FakeHubCache``
have the same commit, and a download of one gives exactly the other's layout (same blob names,
same snapshot folder). A file's etag is what huggingface_hub names its blob: the git blob sha1,
or the sha256 of an LFS file (``layout.etag_for``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pytest_startup_guard.cache.layout import (
    LFS_THRESHOLD_BYTES,
    FileContent,
    commit_for,
    encode_content,
    etag_for,
    git_blob_sha1,
    is_commit,
    is_lfs,
    validate_filename,
    validate_repo_id,
    validate_revision,
)
from pytest_startup_guard.checks import shown
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError


@dataclass(frozen=True)
class RemoteCommit:
    """One commit of a repo on the remote: its id and every file's bytes."""

    repo_id: str
    commit: str
    files: Mapping[str, bytes]
    lfs_threshold: int = LFS_THRESHOLD_BYTES

    def etag(self, filename: str) -> str:
        """The blob name huggingface_hub gives the file: sha256 for LFS, else git blob sha1."""
        return etag_for(filename, self.files[filename], self.lfs_threshold)

    def oid(self, filename: str) -> str:
        """The git object id of the file (for an LFS file: of its pointer file, as on the hub)."""
        data = self.files[filename]
        if self.is_lfs(filename):
            return git_blob_sha1(lfs_pointer(self.etag(filename), len(data)))
        return git_blob_sha1(data)

    def is_lfs(self, filename: str) -> bool:
        return is_lfs(filename, len(self.files[filename]), self.lfs_threshold)


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The Git LFS pointer file the hub keeps in git for an LFS file."""
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"
    ).encode()


class NotOnRemote(LookupError):
    """What the remote does not have: ``kind`` is ``RepoNotFound``, ``RevisionNotFound`` or
    ``EntryNotFound`` (the hub's ``X-Error-Code``), ``message`` its ``X-Error-Message``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class _Repo:
    commits: dict[str, RemoteCommit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)


class RemoteRepos:
    """Every repo of one remote; safe to read from the server's threads while a test pushes."""

    def __init__(self, lfs_threshold: int = LFS_THRESHOLD_BYTES) -> None:
        self.lfs_threshold = lfs_threshold
        self._repos: dict[str, _Repo] = {}
        self._lock = threading.Lock()

    def add_model(
        self, repo_id: str, files: Mapping[str, FileContent], revision: str, where: str
    ) -> RemoteCommit:
        validate_repo_id(repo_id)
        validate_revision(revision)
        contents = _contents(files, where)
        with self._lock:
            if repo_id in self._repos and revision in self._repos[repo_id].branches:
                raise InvalidArgumentError(
                    f"invalid repo_id={repo_id!r} for {where}: the remote has it already, with a"
                    f" branch {revision!r}; push a new commit with hub_remote.push({repo_id!r}, files)"
                )
            return self._commit(
                self._repos.setdefault(repo_id, _Repo()), repo_id, revision, contents
            )

    def push(
        self,
        repo_id: str,
        files: Mapping[str, FileContent],
        branch: str,
        delete: Iterable[str],
        where: str,
    ) -> RemoteCommit:
        validate_repo_id(repo_id)
        validate_revision(branch)
        contents = _contents(files, where)
        if isinstance(delete, (str, bytes)) or not isinstance(delete, Iterable):
            raise ArgumentTypeError(
                f"invalid delete={shown(delete)} for {where}: expected a list of file names"
            )
        removed = [validate_filename(name) for name in delete]
        with self._lock:
            repo = self._repos.get(repo_id)
            if repo is None:
                raise InvalidArgumentError(
                    f"invalid repo_id={repo_id!r} for {where}: the remote has no such repo"
                    f" (it has: {', '.join(sorted(self._repos)) or 'none'}); add it first with"
                    f" hub_remote.add_model({repo_id!r}, files)"
                )
            head = repo.branches.get(branch)
            merged = dict(repo.commits[head].files) if head is not None else {}
            for name in removed:
                if name not in merged:
                    raise InvalidArgumentError(
                        f"invalid delete={name!r} for {where}: {repo_id}@{branch} has no such"
                        f" file (it has: {', '.join(sorted(merged)) or 'none'})"
                    )
                del merged[name]
            merged.update(contents)
            if not merged:
                raise InvalidArgumentError(
                    f"invalid push for {where}: {repo_id}@{branch} would have no file left"
                )
            return self._commit(repo, repo_id, branch, merged)

    def _commit(
        self, repo: _Repo, repo_id: str, branch: str, contents: Mapping[str, bytes]
    ) -> RemoteCommit:
        etags = {name: etag_for(name, data, self.lfs_threshold) for name, data in contents.items()}
        commit = RemoteCommit(
            repo_id, commit_for("model", repo_id, etags), dict(contents), self.lfs_threshold
        )
        repo.commits[commit.commit] = commit
        repo.branches[branch] = commit.commit
        return commit

    def resolve(self, repo_id: str, revision: str) -> RemoteCommit:
        """The commit a branch names, or the commit itself; ``NotOnRemote`` otherwise."""
        with self._lock:
            repo = self._repos.get(repo_id)
            if repo is None:
                raise NotOnRemote("RepoNotFound", f"Repository Not Found for url: {repo_id}.")
            if revision in repo.branches:
                return repo.commits[repo.branches[revision]]
            if is_commit(revision) and revision in repo.commits:
                return repo.commits[revision]
            raise NotOnRemote("RevisionNotFound", f"Invalid rev id: {revision}")

    def file(self, repo_id: str, revision: str, filename: str) -> tuple[RemoteCommit, bytes]:
        commit = self.resolve(repo_id, revision)
        data = commit.files.get(filename)
        if data is None:
            raise NotOnRemote("EntryNotFound", f"Entry not found: {filename} in {repo_id}")
        return commit, data

    def blob(self, sha256: str) -> bytes | None:
        """The bytes of an LFS file by its sha256 (what the CDN path serves)."""
        with self._lock:
            for repo in self._repos.values():
                for commit in repo.commits.values():
                    for name, data in commit.files.items():
                        if commit.is_lfs(name) and commit.etag(name) == sha256:
                            return data
        return None

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._repos)


def _contents(files: Mapping[str, FileContent], where: str) -> dict[str, bytes]:
    if not isinstance(files, Mapping):
        raise ArgumentTypeError(
            f"invalid files={shown(files)} for {where}: expected a dict of file name to content"
            " (a dict or list written as JSON, a str or bytes)"
        )
    if not files:
        raise InvalidArgumentError(f"invalid files={{}} for {where}: expected at least one file")
    return {validate_filename(name): encode_content(name, data) for name, data in files.items()}
