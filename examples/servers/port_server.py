"""A small real HTTP server that binds its port at start-up: what the port faults put to the test.

    python port_server.py --port 8000 [--on-busy die|retry|other-port] [--retry-seconds 10]

It serves ``GET /health``: 200 with ``{"status": "ok", "port": P, "pid": N}``, the port it
serves on and its process id (so a test can tell which server answered). What it does when its
port is already in use:

- ``die``: nothing: it exits with the ``OSError`` (``Address already in use``);
- ``retry``: retries the bind, the delay doubling from 50 ms up to 0.5 s, for up to
  ``--retry-seconds`` (default 10); then it dies with the last ``OSError``;
- ``other-port``: binds port 0 instead (the system picks a free port) and prints the port it got.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOST = "127.0.0.1"


class Handler(BaseHTTPRequestHandler):
    health = b""  # set once the server knows the port it serves on

    def do_GET(self) -> None:
        found = self.path == "/health"
        payload = self.health if found else b'{"error": "not found"}'
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def in_use(error: OSError) -> bool:
    return error.errno == errno.EADDRINUSE


def bind(port: int, on_busy: str, retry_seconds: float) -> ThreadingHTTPServer:
    """The server, bound and listening, by the policy for a port in use."""
    handler = Handler
    if on_busy == "die":
        return ThreadingHTTPServer((HOST, port), handler)
    if on_busy == "other-port":
        try:
            return ThreadingHTTPServer((HOST, port), handler)
        except OSError as error:
            if not in_use(error):
                raise
            server = ThreadingHTTPServer((HOST, 0), handler)
            print(
                f"port {port} is in use ({error.strerror}); serving on port"
                f" {server.server_address[1]} instead",
                flush=True,
            )
            return server
    deadline = time.monotonic() + retry_seconds
    delay = 0.05
    while True:
        try:
            return ThreadingHTTPServer((HOST, port), handler)
        except OSError as error:
            if not in_use(error) or time.monotonic() + delay > deadline:
                raise
            print(
                f"port {port} is in use ({error.strerror}); retrying in {delay:.2f} s", flush=True
            )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--on-busy", choices=("die", "retry", "other-port"), default="die")
    parser.add_argument("--retry-seconds", type=float, default=10.0)
    args = parser.parse_args()
    server = bind(args.port, args.on_busy, args.retry_seconds)
    port = server.server_address[1]
    Handler.health = json.dumps({"status": "ok", "port": port, "pid": os.getpid()}).encode()
    print(f"serving on http://{HOST}:{port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
