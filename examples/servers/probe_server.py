"""A small HTTP server that picks an internal port itself: what ``port_stolen`` puts to the test.

    python probe_server.py --port 8000 [--pick zero|scan] [--base N] [--bind python|native]
                           [--on-busy die|retry]

At start-up it picks a port for its internal "store" the way serving stacks do, then binds that
port for real, and only then serves ``GET /health`` on ``--port``: 200 with ``{"status": "ok",
"port": P, "store": S, "pid": N}``.

- ``--pick zero``: bind a TCP socket to port 0, read the port the system gave, close the socket
  (vLLM's ``get_open_port()``, PyTorch's ``_get_open_port``);
- ``--pick scan --base N``: try N, N+1, ... until a bind succeeds, close it, and use that port
  (vLLM's ``VLLM_PORT`` loop: two servers scanning from one base can pick the same port);
- ``--bind python``: the real bind is ``socket.bind`` and ``listen``;
- ``--bind native``: the real bind is libc's ``socket``/``bind``/``listen`` called through
  ``ctypes``, with no ``socket.bind`` audit event, as PyTorch's C++ ``TCPStore`` or libzmq bind;
- ``--on-busy die``: a store port that is taken by then ends the server with the ``OSError``
  (``Address already in use``); ``--on-busy retry``: it picks again (up to 20 times).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import socket
import struct
import sys
from http.server import ThreadingHTTPServer

from port_server import HOST, Handler  # its /health handler; this script's folder is on sys.path

PICKS = 20  # attempts of --on-busy retry


def pick_zero() -> int:
    """A free port, as the system hands it out: bind port 0, read it, close the socket."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def pick_scan(base: int) -> int:
    """The first port from ``base`` up that can be bound (the socket is closed again)."""
    port = base
    while True:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind((HOST, port))
                return port
        except OSError:
            port += 1


class NativeSocket:
    """A listening TCP socket made by libc directly: no Python ``socket`` object, no audit event."""

    def __init__(self, port: int) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.libc = libc
        self.fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
        if self.fd < 0:
            self._fail("socket")
        one = ctypes.c_int(1)
        libc.setsockopt(self.fd, socket.SOL_SOCKET, socket.SO_REUSEADDR, ctypes.byref(one), 4)
        # struct sockaddr_in: family (native order), port (network order), address, 8 zero bytes
        address = struct.pack("=H", socket.AF_INET) + struct.pack("!H", port)
        address += socket.inet_aton(HOST) + bytes(8)
        buffer = ctypes.create_string_buffer(address, len(address))
        if libc.bind(self.fd, buffer, len(address)) != 0:
            self._fail(f"bind to {HOST}:{port}")
        if libc.listen(self.fd, 16) != 0:
            self._fail(f"listen on {HOST}:{port}")

    def _fail(self, what: str) -> None:
        code = ctypes.get_errno()
        if self.fd >= 0:
            self.libc.close(self.fd)
        raise OSError(code, f"{os.strerror(code)} (native {what})")


def bind_store(port: int, how: str) -> object:
    """The store's listening socket on ``port``, bound by Python or by libc."""
    if how == "native":
        return NativeSocket(port)
    store = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    store.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        store.bind((HOST, port))
        store.listen(16)
    except OSError:
        store.close()
        raise
    return store


def start_store(args: argparse.Namespace) -> tuple[int, object]:
    """Pick the store's port and bind it, by the policy for a port that is taken by then."""
    for attempt in range(1, PICKS + 1):
        port = pick_zero() if args.pick == "zero" else pick_scan(args.base)
        print(f"picked store port {port}", flush=True)
        try:
            return port, bind_store(port, args.bind)
        except OSError as error:
            if args.on_busy == "die" or error.errno != errno.EADDRINUSE or attempt == PICKS:
                raise
            print(f"store port {port} is in use ({error.strerror}); picking again", flush=True)
    raise AssertionError("unreachable")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pick", choices=("zero", "scan"), default="zero")
    parser.add_argument("--base", type=int, default=None)
    parser.add_argument("--bind", choices=("python", "native"), default="python")
    parser.add_argument("--on-busy", choices=("die", "retry"), default="die")
    args = parser.parse_args()
    if args.pick == "scan" and args.base is None:
        parser.error("--pick scan needs --base")
    store_port, store = start_store(args)
    server = ThreadingHTTPServer((HOST, args.port), Handler)
    port = server.server_address[1]
    health = {"status": "ok", "port": port, "store": store_port, "pid": os.getpid()}
    Handler.health = json.dumps(health).encode()
    print(f"serving on http://{HOST}:{port}, store on port {store_port}", flush=True)
    try:
        server.serve_forever()
    finally:
        del store
    return 0


if __name__ == "__main__":
    sys.exit(main())
