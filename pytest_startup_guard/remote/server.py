"""The loopback hub's HTTP server: what huggingface_hub calls to download, nothing more.

Read from the releases' sources (0.8.1, 0.10.0, 1.30.0, 1.31.0, 2.4.0):

- ``GET /api/models/<repo>/revision/<rev>`` (``HfApi.model_info``/``repo_info``): the commit
  (``sha``) and the files (``siblings``). ``snapshot_download`` calls it first in every release.
- ``GET /api/models/<repo>/tree/<rev>[/<path>]`` (``list_repo_tree``, ``recursive=True``): the
  files with ``oid``, ``size`` and ``lfs``; ``snapshot_download`` lists them from 1.x on.
- ``HEAD /<repo>/resolve/<rev>/<file>`` (``get_hf_file_metadata``): ``X-Repo-Commit``, ``ETag``
  (quoted git blob id), ``Content-Length``; an LFS file answers 302 to a CDN path with
  ``X-Linked-Etag`` (its sha256) and ``X-Linked-Size``. 0.8.1 reads the same headers.
- ``GET`` of ``resolve`` or of the CDN path: the bytes, with ``Range`` (206 and
  ``Content-Range``; 416 past the end), which the downloads use to resume a cut-off body.
- Anything the remote lacks: 404 with ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``,
  ``EntryNotFound``) and ``X-Error-Message``, which ``hf_raise_for_status`` turns into
  ``RepositoryNotFoundError``, ``RevisionNotFoundError`` and ``EntryNotFoundError``.

No ``X-Xet-Hash`` header is ever sent, so no release takes the xet path. The CDN path is on the
same server: 2.4.0 follows a same-host redirect of a HEAD, so the CDN answers carry the same
headers as ``resolve``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from pytest_startup_guard.remote.repos import NotOnRemote, RemoteCommit, RemoteRepos
from pytest_startup_guard.remote.wire_faults import ArmedWireFault, WireFaults

CDN = "lfs-cdn"
_WRONG_ETAG_MARK = "wrong_etag=1"  # /lfs-cdn/<org--name>/<commit>/<file>: where an LFS file's HEAD and GET redirect
REPO_TYPE_PREFIXES = {"datasets": "dataset", "spaces": "space"}


@dataclass(frozen=True)
class RemoteRequest:
    """One request the remote answered: what was asked, the status, the body bytes sent, the
    ``Range`` asked for, and the wire fault that acted on it (if any)."""

    method: str
    path: str
    status: int
    sent: int
    range: str | None
    fault: str | None


class _Server(ThreadingHTTPServer):
    """One daemon thread per connection (HTTP/1.1 keeps a connection open between requests);
    ``close`` cuts the open connections and joins their threads, within a bound."""

    daemon_threads = True
    block_on_close = False

    def __init__(
        self, repos: RemoteRepos, faults: WireFaults, log: Callable[[RemoteRequest], None]
    ):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos = repos
        self.faults = faults
        self.log = log
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.stopping = threading.Event()  # a slow body stops waiting once it is set
        # Answers begun and not yet in the log: a client may hold a whole answer before the
        # thread that sent it logged it (``settle``).
        self._answering = 0
        self._answered = threading.Condition()
        self._live: dict[threading.Thread, socket.socket] = {}
        self._live_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection, args=(request, client_address), daemon=True
        )
        with self._live_lock:
            self._live[thread] = request
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._live_lock:
                self._live.pop(threading.current_thread(), None)

    def answering(self, change: int) -> None:
        with self._answered:
            self._answering += change
            if not self._answering:
                self._answered.notify_all()

    def settle(self, bound: float) -> None:
        """Wait, up to ``bound`` seconds, until every answer begun is in the log."""
        with self._answered:
            self._answered.wait_for(lambda: not self._answering, timeout=bound)

    def cut_connections(self, bound: float) -> list[str]:
        """Cut every open connection and join its thread for up to ``bound`` seconds in all;
        the threads still running after it (named for the teardown's message)."""
        self.stopping.set()
        with self._live_lock:
            live = dict(self._live)
        for connection in live.values():
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its client
        deadline = time.monotonic() + bound
        for thread in live:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [thread.name for thread in live if thread.is_alive()]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: every request is in ``HubRemote.requests`` instead."""

    def do_HEAD(self) -> None:
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    # -- routing -------------------------------------------------------------------------------

    def _answer(self) -> None:
        path = urlsplit(self.path).path
        parts = [unquote(part) for part in path.strip("/").split("/")]
        try:
            if parts[:1] == ["api"]:
                self._api(parts[1:])
            elif parts[:1] == [CDN] and len(parts) >= 4:
                repo = parts[1].replace("--", "/")  # a repo id never holds "--"
                self._file(repo, parts[2], "/".join(parts[3:]), cdn=True)
            elif "resolve" in parts:
                index = parts.index("resolve")
                found = _repo_id(parts[:index])
                if found is None or len(parts) < index + 3:
                    raise NotOnRemote("RepoNotFound", f"Repository Not Found for url: {path}.")
                self._file(found, parts[index + 1], "/".join(parts[index + 2 :]), cdn=False)
            else:
                raise NotOnRemote("RepoNotFound", f"Repository Not Found for url: {path}.")
        except NotOnRemote as missing:
            headers = {"X-Error-Code": missing.kind, "X-Error-Message": missing.message}
            if missing.commit is not None:
                headers["X-Repo-Commit"] = missing.commit
            self._send(
                404,
                json.dumps({"error": missing.message}).encode(),
                headers,
                content_type="application/json",
            )
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (a killed member)

    def _api(self, parts: list[str]) -> None:
        # api/models/<org>/<name>/revision/<rev>, api/models/<org>/<name>/tree/<rev>[/path],
        # api/models/<org>/<name> (model_info of main)
        if parts[:1] != ["models"]:
            raise NotOnRemote(
                "RepoNotFound", f"Repository Not Found for url: /api/{'/'.join(parts)}."
            )
        rest = parts[1:]
        for verb in ("revision", "tree"):
            if verb in rest:
                index = rest.index(verb)
                repo, revision = _repo_id(rest[:index]), rest[index + 1 : index + 2]
                if repo is None or not revision:
                    break
                if self._fault_acts(None, body=False):
                    return
                commit = self.server.repos.resolve(repo, revision[0])
                if verb == "revision":
                    self._json(_model_info(commit))
                else:
                    prefix = "/".join(rest[index + 2 :])
                    self._json(_tree(commit, prefix))
                return
        repo = _repo_id(rest)
        if repo is None:
            raise NotOnRemote(
                "RepoNotFound", f"Repository Not Found for url: /api/{'/'.join(parts)}."
            )
        if self._fault_acts(None, body=False):
            return
        self._json(_model_info(self.server.repos.resolve(repo, "main")))

    def _file(self, repo: str, revision: str, filename: str, *, cdn: bool) -> None:
        commit, data = self.server.repos.file(repo, revision, filename)
        body = self.command == "GET"
        acting = self._matching_fault(filename, body=body and (cdn or not commit.is_lfs(filename)))
        if acting is not None and acting.fault.kind == "server_error":
            self._send(acting.fault.status, b"", {}, fault=acting)
            return
        etag = commit.etag(filename)
        # An LFS file's metadata is asked twice by releases that follow a same-host redirect
        # (1.x, 2.x: the resolve HEAD, then the CDN HEAD): the CDN answer repeats the wrong
        # etag the resolve answer gave, marked in the Location, so one lookup is one request.
        wrong = (acting is not None and acting.fault.kind == "wrong_etag") or (
            cdn and _WRONG_ETAG_MARK in urlsplit(self.path).query
        )
        if wrong:
            etag = _wrong(etag)
        headers = {"X-Repo-Commit": commit.commit}
        if commit.is_lfs(filename):
            headers["X-Linked-Etag"] = f'"{etag}"'
            headers["X-Linked-Size"] = str(len(data))
            if not cdn:
                flat = repo.replace("/", "--")
                location = f"{self.server.url}/{CDN}/{flat}/{commit.commit}/{filename}"
                if wrong:
                    location += f"?{_WRONG_ETAG_MARK}"
                headers["ETag"] = f'"{commit.oid(filename)}"'
                headers["Location"] = location
                self._send(302, b"", headers, fault=acting)
                return
        headers["ETag"] = f'"{etag}"'
        headers["Accept-Ranges"] = "bytes"
        self._body(data, headers, acting)

    # -- faults --------------------------------------------------------------------------------

    def _matching_fault(self, filename: str | None, *, body: bool) -> ArmedWireFault | None:
        return self.server.faults.acting(filename, body=body, path=f"{self.command} {self.path}")

    def _fault_acts(self, filename: str | None, *, body: bool) -> bool:
        """Whether a server_error answered this API request."""
        acting = self._matching_fault(filename, body=body)
        if acting is not None and acting.fault.kind == "server_error":
            self._send(acting.fault.status, b"", {}, fault=acting)
            return True
        return False

    # -- sending -------------------------------------------------------------------------------

    def _json(self, value: object) -> None:
        self._send(200, json.dumps(value).encode(), {}, content_type="application/json")

    def _body(self, data: bytes, headers: dict[str, str], acting: ArmedWireFault | None) -> None:
        asked = self.headers.get("Range")
        start, end, status = 0, len(data), 200
        if asked:
            span = _range(asked, len(data))
            if span is None:
                headers["Content-Range"] = f"bytes */{len(data)}"
                self._send(416, b"", headers, fault=acting)
                return
            start, end = span
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
        self._send(status, data[start:end], headers, fault=acting)

    def _send(
        self,
        status: int,
        body: bytes,
        headers: dict[str, str],
        *,
        content_type: str = "application/octet-stream",
        fault: ArmedWireFault | None = None,
    ) -> None:
        sent = 0
        self.server.answering(1)
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                sent = self._write(body, fault)
        finally:
            self.server.log(
                RemoteRequest(
                    self.command,
                    self.path,
                    status,
                    sent,
                    self.headers.get("Range"),
                    fault.describe() if fault is not None else None,
                )
            )
            self.server.answering(-1)

    def _write(self, body: bytes, fault: ArmedWireFault | None) -> int:
        kind = fault.fault.kind if fault is not None else None
        if kind == "drop_connection":
            assert fault is not None
            part = body[: fault.fault.after_bytes]
            self.wfile.write(part)
            self.wfile.flush()
            # A cut, not a close: the client reads fewer bytes than Content-Length said.
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return len(part)
        if kind == "slow_body":
            assert fault is not None
            step = fault.fault.chunk
            for offset in range(0, len(body), step):
                self.wfile.write(body[offset : offset + step])
                self.wfile.flush()
                if offset + step < len(body) and self.server.stopping.wait(fault.fault.delay):
                    return offset + step  # the remote is closing: the body stays cut
            return len(body)
        self.wfile.write(body)
        return len(body)


def _wrong(etag: str) -> str:
    """An etag of the same form (40 or 64 hex) that names no content the remote serves."""
    return ("0" * len(etag)) if etag.strip("0") else "1" * len(etag)


def _repo_id(parts: list[str]) -> str | None:
    """``org/name`` (or ``name``) from path parts; None for what the remote does not serve
    (datasets and spaces are not served: a model repo is what a server loads)."""
    if parts[:1] and parts[0] in REPO_TYPE_PREFIXES:
        return None
    if len(parts) in (1, 2) and all(parts):
        return "/".join(parts)
    return None


def _range(header: str, size: int) -> tuple[int, int] | None:
    """``bytes=a-b``, ``bytes=a-`` or ``bytes=-n`` as a half-open span; None past the end."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    first, _, last = spec.strip().partition("-")
    try:
        if not first:
            count = int(last)
            return (max(size - count, 0), size) if count > 0 and size else None
        start = int(first)
        end = min(int(last) + 1, size) if last else size
    except ValueError:
        return None
    return (start, end) if start < size and start < end else None


def _model_info(commit: RemoteCommit) -> dict[str, object]:
    return {
        "_id": commit.commit[:24],
        "id": commit.repo_id,
        "modelId": commit.repo_id,
        "sha": commit.commit,
        "private": False,
        "disabled": False,
        "gated": False,
        "tags": [],
        "siblings": [{"rfilename": name} for name in sorted(commit.files)],
    }


def _tree(commit: RemoteCommit, prefix: str) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    for name in sorted(commit.files):
        if prefix and not name.startswith(prefix.rstrip("/") + "/"):
            continue
        entry: dict[str, object] = {
            "type": "file",
            "oid": commit.oid(name),
            "size": len(commit.files[name]),
            "path": name,
        }
        if commit.is_lfs(name):
            entry["lfs"] = {
                "oid": commit.etag(name),
                "size": len(commit.files[name]),
                "pointerSize": len(commit.lfs_pointer(name)),
            }
        entries.append(entry)
    return entries


class HubServer:
    """The server thread of one remote: started at once, stopped by ``close``."""

    def __init__(
        self, repos: RemoteRepos, faults: WireFaults, log: Callable[[RemoteRequest], None]
    ) -> None:
        self._server = _Server(repos, faults, log)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return self._server.url

    def settle(self, bound: float = 1.0) -> None:
        """Let the answers being sent reach the log (a slow body still sending: ``bound``)."""
        self._server.settle(bound)

    def close(self, bound: float = 5.0) -> list[str]:
        """Stop accepting, cut the open connections, join every thread within ``bound``
        seconds; what did not end in time, as problems."""
        deadline = time.monotonic() + bound
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        stuck = self._server.cut_connections(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            stuck.append(self._thread.name)
        return [
            f"the loopback hub's thread {name} did not end within {bound:g} s" for name in stuck
        ]
