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
from pytest_startup_guard.cache.layout import FileContent, repo_folder_name
from pytest_startup_guard.checks import shown
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.lifetimes import lives_for_its_test
from pytest_startup_guard.remote.loopback import off_loopback
from pytest_startup_guard.remote.repos import (
    NotOnRemote,
    RemoteCommit,
    RemoteRepos,
    checked_repo_id,
    checked_revision,
)
from pytest_startup_guard.remote.server import HubServer, RemoteRequest
from pytest_startup_guard.remote.wire_faults import ArmedWireFault, WireFaults

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pytest_startup_guard.remote.writer import WriterCommand
    from pytest_startup_guard.runtime.controller import RuntimeController

# Left over by a download that did not finish, or by a writer's temporary file. (A ``.lock``
# next to a blob is not: releases up to 0.18 lock ``blobs/<etag>.lock`` and leave the file.)
_LEFTOVER_SUFFIXES = (".incomplete", ".tmp")


@lives_for_its_test
class HubRemote:
    """The loopback hub of one test (the ``hub_remote`` fixture): ``add_model`` and ``push``
    what it serves, ``inject`` faults on the wire, ``requests`` is every request it answered."""

    def __init__(self, cache: FakeHubCache) -> None:
        self.cache = cache
        self.repos = RemoteRepos(cache.lfs_threshold)
        self.wire_faults = WireFaults()  # what the server asks which fault acts on a request
        self._requests: list[RemoteRequest] = []
        self._lock = threading.Lock()
        self._server = HubServer(self.repos, self.wire_faults, self._log)
        self.url = self._server.url
        self._controller: RuntimeController | None = None

    def __repr__(self) -> str:
        return f"HubRemote({self.url!r}, cache={self.cache.root})"

    def _log(self, request: RemoteRequest) -> None:
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[RemoteRequest]:
        """Every request answered so far, in order (an answer still being sent is waited for,
        up to 1 s: the client may hold it before the server's thread logged it)."""
        self._server.settle()
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
        return self.wire_faults.arm(faults, "hub_remote.inject()")

    @property
    def faults(self) -> list[ArmedWireFault]:
        """Every fault injected, in the order given: each answers ``met``, ``effects``,
        ``describe()``, ``miss()``, ``lines()``, as a fleet's faults do (``.hits``,
        ``.seen``, ``.paths`` too)."""
        return self.wire_faults.listed()

    # -- verdicts --------------------------------------------------------------------------------

    def assert_cache_whole(
        self, repo_id: str, *, revision: str = "main", cache: FakeHubCache | None = None
    ) -> None:
        """The cache holds the remote's ``revision`` of the repo whole and shared: the ref names
        its commit, each file is a pointer to a blob with the file's bytes, one blob per
        content, nothing half-written left."""
        __tracebackhide__ = True
        where = "hub_remote.assert_cache_whole()"
        commit = self._served(repo_id, revision, where)
        if cache is not None and not isinstance(cache, FakeHubCache):
            raise ArgumentTypeError(
                f"invalid cache={shown(cache)} for {where}: expected a FakeHubCache (hub_cache,"
                " or None for hub_remote.cache)"
            )
        problems = cache_problems(cache or self.cache, commit, revision)
        if problems:
            raise AssertionError(
                f"the cache {(cache or self.cache).hub_dir} does not hold {repo_id}@{revision}"
                f" ({commit.commit[:12]}) whole:\n  " + "\n  ".join(problems)
            )

    def _served(self, repo_id: object, revision: object, where: str) -> RemoteCommit:
        """The remote's commit of ``repo_id`` at ``revision``, or a clear error at the call."""
        name = checked_repo_id(repo_id, where)
        branch = checked_revision(revision, where)
        try:
            return self.repos.resolve(name, branch)
        except NotOnRemote as missing:
            raise InvalidArgumentError(
                f"invalid repo_id={name!r}, revision={branch!r} for {where}: {missing.message}"
                f" on the remote (it serves: {', '.join(self.repos.names()) or 'nothing'})"
            ) from None

    def watch_connects(self, controller: RuntimeController) -> None:
        """Check, at ``close``, that no process of the test reached an address other than
        loopback (the child runtime reports every connect and name lookup made in Python)."""
        controller.record_footprint()
        self._controller = controller

    def close(self) -> list[str]:
        """Stop the server; the faults no request met, the addresses other than loopback that
        a process reached, the server threads that did not end: as problems."""
        problems = self._server.close()
        problems += self.wire_faults.unmet()
        if self._controller is not None:
            problems += off_loopback(self._controller, self.url)
        return problems

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
    for temporary in sorted(cache.hub_dir.glob("tmp*")):
        # huggingface_hub < 0.11 downloads into a NamedTemporaryFile at the cache's top unless
        # resume_download=True, and leaves it there when the download fails.
        if temporary.is_file():
            problems.append(f"{temporary.name} (at the cache's top): left by a download")
    for leftover in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if leftover.parent != blobs and leftover.name.endswith((".incomplete", ".tmp")):
            problems.append(f"{leftover.relative_to(folder)}: left by a writer that did not finish")
    return problems
