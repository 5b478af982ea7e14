"""A vLLM-style launcher: one listening socket, N API-server processes that share it.

    python launcher_server.py --port 8000 --repo acme/tiny --api-server-count 4 [--retry] [--swallow]

``vllm serve --api-server-count N`` does not start one server: a launcher binds the listening
socket once, then starts N API-server processes with multiprocessing's *spawn* start method,
each handed that socket, each loading the model's config from the Hugging Face cache before it
accepts. A probe on the port is answered by whichever API server is up first; the others may
still be loading, or dead. This launcher copies that topology with nothing but the standard
library and ``transformers``:

- the socket reaches each spawn child as a ``Process`` argument: multiprocessing pickles a
  socket by duplicating its descriptor and hands it to the child through the spawn's
  ``pass_fds`` (``multiprocessing.reduction.DupFd``), as vLLM's ``APIServerProcessManager``
  does;
- each API server calls ``transformers.AutoConfig.from_pretrained(REPO)`` (offline, from
  ``HF_HOME``), then serves ``GET /health`` (``ok``) and ``GET /config`` (the ``model_type``
  and its pid, as JSON) on the shared socket;
- without ``--retry`` a failed load ends the API server with its exception (exit code 1, the
  traceback on stderr); with ``--retry`` the load is tried 3 times, 0.1 s then 0.2 s apart,
  and the last failure ends it the same way; with ``--swallow`` a failed load is printed and
  a default config served instead (the bug that hides a corrupt config);
- the launcher supervises, as vLLM's ``wait_for_completion_or_failure`` does: when an API
  server dies it logs which one and how it ended, ends the others and exits 1; on SIGTERM or
  SIGINT it ends its API servers and exits 0.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from worker_config import load_config  # the shared config load and realistic retry

# How long an API server has to end after SIGTERM before it is killed.
STOP_SECONDS = 5.0


def log(message: str) -> None:
    print(f"[launcher pid {os.getpid()}] {message}", file=sys.stderr, flush=True)


def serve_on(sock: socket.socket, body: dict[str, Any]) -> None:
    """Serve ``/health`` and ``/config`` on a socket that is already bound and listening."""
    config = json.dumps(body, sort_keys=True).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self._reply(200, b"ok", "text/plain")
            elif self.path == "/config":
                self._reply(200, config, "application/json")
            else:
                self._reply(404, b'{"error": "not found"}', "application/json")

        def _reply(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            # A client that gave up while every API server was still loading left its
            # connection in the shared backlog; answering it later finds the pipe closed.
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)

    # Not bound here: the launcher bound and listens on the socket; every API server accepts
    # from the same one, the kernel hands each connection to one of them.
    server = Server(sock.getsockname()[:2], Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.serve_forever()


def api_server(index: int, sock: socket.socket, repo: str, retry: bool, swallow: bool) -> None:
    """One API server (a spawn child): load the config, then serve on the launcher's socket.

    A failed load is not caught: the exception ends this process (multiprocessing prints the
    traceback and the exit code is 1), and the launcher sees it die."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # the launcher stops it
    config = load_config(repo, retry, swallow)
    print(
        f"API server {index} (pid {os.getpid()}) serving {config.get('model_type')} "
        f"on http://127.0.0.1:{sock.getsockname()[1]}",
        flush=True,
    )
    serve_on(sock, {"model_type": config.get("model_type"), "pid": os.getpid(), "index": index})


def how_it_ended(process: BaseProcess) -> str:
    code = process.exitcode
    if code is None:
        return "is still running"
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def stop(processes: list[BaseProcess]) -> None:
    """SIGTERM every API server still running, SIGKILL those still there after STOP_SECONDS."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            log(f"{process.name} (pid {process.pid}) did not stop: killing it")
            process.kill()
            process.join()


class Terminated(Exception):
    """SIGTERM or SIGINT reached the launcher: a requested shutdown, not a failure."""


def on_signal(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signal.Signals(signum).name)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--repo", required=True, help="the model's repo id, e.g. acme/tiny")
    parser.add_argument("--api-server-count", type=int, default=1)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--retry", action="store_true", help="retry a failed config load")
    parser.add_argument(
        "--swallow", action="store_true", help="serve a default config when the load fails"
    )
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sock = socket.create_server((args.host, args.port), backlog=128)
    context = multiprocessing.get_context("spawn")
    processes: list[BaseProcess] = []
    log(f"listening on {args.host}:{args.port}, starting {args.api_server_count} API servers")
    try:
        for index in range(args.api_server_count):
            process = context.Process(
                target=api_server,
                name=f"ApiServer_{index}",
                args=(index, sock, args.repo, args.retry, args.swallow),
            )
            process.start()
            processes.append(process)
            log(f"started {process.name} (pid {process.pid})")
        sentinels = {process.sentinel: process for process in processes}
        ended = multiprocessing.connection.wait(list(sentinels))  # until one API server ends
        first = sentinels[ended[0]]  # type: ignore[index]
        first.join()
        log(f"{first.name} (pid {first.pid}) {how_it_ended(first)}: shutting down")
        return 1
    except Terminated as signal_name:
        log(f"received {signal_name}: stopping the API servers")
        return 0
    finally:
        stop(processes)
        sock.close()


if __name__ == "__main__":
    sys.exit(main())
