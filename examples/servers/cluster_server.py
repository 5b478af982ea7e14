"""A small real cluster: member 0 is the head, every other member a worker that joins it at
start-up, as ``ray start --head`` and ``ray start --address=<head>`` do.

    python cluster_server.py --port P --index I --head-port H [--policy naive|wait]

The head serves ``GET /health`` on ``--port``. A worker first joins the head: a TCP connection
to ``127.0.0.1:H`` and ``GET /health``; then it serves its own ``/health``. Pods and hosts start
in any order, so a worker may run before the head listens (ai-dynamo/dynamo#14115):

- ``naive``: joins once: a head that does not listen yet kills it (``ConnectionRefusedError``);
- ``wait``: retries the join every 0.05 s for up to 10 s (the fix: a bounded wait on the head's
  port), then fails closed naming the head's address.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

from config_server import serve

JOIN_TIMEOUT = 10.0  # seconds a waiting worker tries to join


def join(head_port: int) -> None:
    with socket.create_connection(("127.0.0.1", head_port), timeout=5) as connection:
        connection.sendall(b"GET /health HTTP/1.0\r\nHost: head\r\n\r\n")
        if not connection.recv(64).startswith(b"HTTP/1.0 200"):
            raise ConnectionError(f"the head at 127.0.0.1:{head_port} is not healthy")


def join_waiting(head_port: int) -> None:
    deadline = time.monotonic() + JOIN_TIMEOUT
    while True:
        try:
            join(head_port)
            return
        except OSError as error:
            if time.monotonic() > deadline:
                raise ConnectionError(
                    f"the head at 127.0.0.1:{head_port} did not listen within {JOIN_TIMEOUT:g} s"
                ) from error
            time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--head-port", type=int, required=True)
    parser.add_argument("--policy", choices=("naive", "wait"), default="naive")
    args = parser.parse_args()
    if args.index != 0:
        try:
            (join if args.policy == "naive" else join_waiting)(args.head_port)
        except OSError as error:
            print(f"worker failed to join the head: {type(error).__name__}: {error}",
                  file=sys.stderr)  # fmt: skip
            return 1
    serve({"model_type": "head" if args.index == 0 else "worker"}, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
