"""``hub_remote``: a hub on 127.0.0.1 that the test's processes download from, online.

The members get ``HF_ENDPOINT`` (this server), online mode and a cache: the test's ``hub_cache``
(warm) when the test uses it, else a fake cache of the test's own that starts empty (cold). No
other address is named to them: the hub's own (``huggingface.co``) is never contacted, and
telemetry, xet and hf_transfer are off.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_startup_guard.cache.hubcache import FakeHubCache
from pytest_startup_guard.cache.layout import FileContent, repo_folder_name, validate_revision
from pytest_startup_guard.remote.repos import RemoteCommit, RemoteRepos
from pytest_startup_guard.remote.server import HubServer, RemoteRequest
from pytest_startup_guard.remote.wire_faults import ArmedWireFault, WireFaults

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pytest_startup_guard.remote.writer import WriterCommand

# Left over by a download that did not finish, or by a writer's temporary file. (A ``.lock``
# next to a blob is not: releases up to 0.18 lock ``blobs/<etag>.lock`` and leave the file.)
_LEFTOVER_SUFFIXES = (".incomplete", ".tmp")


class HubRemote:
    """The loopback hub of one test (the ``hub_remote`` fixture): ``add_model`` and ``push``
    what it serves, ``inject`` faults on the wire, ``requests`` is every request it answered."""

    def __init__(self, cache: FakeHubCache) -> None:
        self.cache = cache
        self.repos = RemoteRepos(cache.lfs_threshold)
        self.faults = WireFaults()
        self._requests: list[RemoteRequest] = []
        self._lock = threading.Lock()
        self._server = HubServer(self.repos, self.faults, self._log)
        self.url = self._server.url

    def __repr__(self) -> str:
        return f"HubRemote({self.url!r}, cache={self.cache.root})"

    def _log(self, request: RemoteRequest) -> None:
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[RemoteRequest]:
        """Every request answered so far, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to download from this remote into ``cache``, online."""
        loopback = "127.0.0.1,localhost"
        return {
            **self.cache.env,
            "HF_ENDPOINT": self.url,
            "HF_HUB_OFFLINE": "0",
            "TRANSFORMERS_OFFLINE": "0",
            "HF_DATASETS_OFFLINE": "0",
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_ENABLE_HF_TRANSFER": "0",
            "HF_HUB_ETAG_TIMEOUT": "10",
            "HF_HUB_DOWNLOAD_TIMEOUT": "10",
            "NO_PROXY": loopback,
            "no_proxy": loopback,
        }

    # -- what it serves --------------------------------------------------------------------------

    def add_model(
        self, repo_id: str, files: Mapping[str, FileContent], *, revision: str = "main"
    ) -> RemoteCommit:
        """A new model repo whose branch ``revision`` has ``files``; its commit."""
        return self.repos.add_model(repo_id, files, revision, "hub_remote.add_model()")

    def push(
        self,
        repo_id: str,
        files: Mapping[str, FileContent],
        *,
        branch: str = "main",
        delete: Iterable[str] = (),
    ) -> RemoteCommit:
        """A new commit on ``branch``: its head's files, updated by ``files``, less ``delete``."""
        return self.repos.push(repo_id, files, branch, delete, "hub_remote.push()")

    def inject(self, *faults: object) -> list[ArmedWireFault]:
        """Arm faults on the wire (``slow_body``, ``drop_connection``, ``server_error``,
        ``wrong_etag``); one that no request met fails the test unless ``allow_miss=True``."""
        return self.faults.arm(faults, "hub_remote.inject()")

    # -- verdicts --------------------------------------------------------------------------------

    def assert_cache_whole(
        self, repo_id: str, *, revision: str = "main", cache: FakeHubCache | None = None
    ) -> None:
        """The cache holds the remote's ``revision`` of the repo whole and shared: the ref names
        its commit, each file is a pointer to a blob with the file's bytes, one blob per
        content, nothing half-written left."""
        __tracebackhide__ = True
        validate_revision(revision)
        commit = self.repos.resolve(repo_id, revision)
        problems = cache_problems(cache or self.cache, commit, revision)
        if problems:
            raise AssertionError(
                f"the cache {(cache or self.cache).hub_dir} does not hold {repo_id}@{revision}"
                f" ({commit.commit[:12]}) whole:\n  " + "\n  ".join(problems)
            )

    def close(self) -> list[str]:
        """Stop the server; the faults no request met, as problems."""
        self._server.close()
        return self.faults.unmet()

    def writer(
        self,
        repo_id: str,
        *,
        call: str = "snapshot_download",
        filename: str | None = None,
        revision: str = "main",
        force_download: bool = False,
        release: str | os.PathLike[str] | None = None,
    ) -> WriterCommand:
        """The real writer: a helper process running huggingface_hub's ``call`` against this
        remote into ``cache`` (``release=``: a folder with another huggingface_hub release)."""
        from pytest_startup_guard.remote.writer import writer_command

        return writer_command(
            self.env,
            self.cache,
            repo_id,
            call=call,
            filename=filename,
            revision=revision,
            force_download=force_download,
            release=release,
        )


def cache_problems(cache: FakeHubCache, commit: RemoteCommit, revision: str) -> list[str]:
    """What keeps ``cache`` from holding ``commit`` whole (empty when it does)."""
    folder = cache.hub_dir / repo_folder_name(commit.repo_id)
    problems: list[str] = []
    ref = folder / "refs" / revision
    try:
        named = ref.read_text()
    except OSError as error:
        named = None
        problems.append(f"refs/{revision}: {error.strerror or error}")
    if named is not None and named != commit.commit:
        problems.append(f"refs/{revision} names {named!r}, not {commit.commit}")
    snapshot = folder / "snapshots" / commit.commit
    for name, data in sorted(commit.files.items()):
        pointer = snapshot / name
        etag = commit.etag(name)
        if not pointer.is_symlink():
            problems.append(
                f"snapshots/{commit.commit[:12]}/{name}: "
                + ("not a pointer (a plain file)" if pointer.exists() else "missing")
            )
            continue
        target = Path(os.path.normpath(pointer.parent / os.readlink(pointer)))
        if target != folder / "blobs" / etag:
            problems.append(
                f"snapshots/{commit.commit[:12]}/{name} points to {target}, not blobs/{etag}"
            )
            continue
        try:
            held = target.read_bytes()
        except OSError as error:
            problems.append(f"blobs/{etag} ({name}): {error.strerror or error}")
            continue
        if held != data:
            problems.append(f"blobs/{etag} ({name}): {len(held)} bytes, not the file's {len(data)}")
    blobs = folder / "blobs"
    if blobs.is_dir():
        contents: dict[bytes, list[str]] = {}
        for blob in sorted(blobs.iterdir()):
            if blob.name.endswith(_LEFTOVER_SUFFIXES) or ".tmp" in blob.name:
                problems.append(f"blobs/{blob.name}: left by a download that did not finish")
                continue
            if not blob.name.endswith(".lock") and blob.is_file():
                contents.setdefault(blob.read_bytes(), []).append(blob.name)
        for names in contents.values():
            if len(names) > 1:
                problems.append(f"one content in {len(names)} blobs: {', '.join(names)}")
    for leftover in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if leftover.parent != blobs and leftover.name.endswith((".incomplete", ".tmp")):
            problems.append(f"{leftover.relative_to(folder)}: left by a writer that did not finish")
    return problems
