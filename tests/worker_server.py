"""A supervisor with workers, for the tests of judging every worker (tests/test_fleet_workers.py).

``python worker_server.py PORT MODE``: the supervisor serves ``GET /health`` on PORT at once
(so its probe passes whatever its workers do) and starts two workers with multiprocessing's
spawn method. Each worker reads the fake cache's ``config.json`` (``HF_HUB_CACHE``, from the
``hub_cache`` fixture) and then does what MODE says:

- ``clean``: both workers read and stay up;
- ``dies_before_ready``: worker 1 fails at once with an ``OSError`` naming config.json;
- ``dies_after_ready``: worker 1 fails 1.5 s after its read (after the supervisor is ready);
- ``slow_worker``: worker 1 starts its read 1 s late, then stays up;
- ``short_helpers``: worker 1 never touches the cache and exits 1; a third process reads the
  cache and exits 0 (a compile helper); worker 0 stays up;
- ``gives_up``: worker 1 fails at once, and the supervisor exits 0 once it sees that, without
  serving (uvicorn's behaviour when its workers die);
- ``exits_zero``: each worker reads, says the config.json is unusable and exits 0 (it does not
  fail); the supervisor exits 1 once they are gone, without serving;
- ``daemonizes``: the supervisor forks a child that serves, and exits 0 itself;
- ``shuts_down``: worker 0 retries its read (3 tries, 0.1 s then 0.2 s apart) and stays up,
  worker 1 fails at once; the supervisor, which served from the start, takes
  1 s to react (a loaded machine's supervisor), then logs ``shutting down`` and exits 1 (the
  vLLM-style launcher's behaviour, after it was ready).
"""

from __future__ import annotations

import glob
import http.server
import multiprocessing
import os
import sys
import threading
import time


def read_config() -> str:
    """The fake cache's config.json of its first repo (an access the child runtime reports)."""
    hub = os.environ["HF_HUB_CACHE"]
    paths = sorted(glob.glob(os.path.join(hub, "models--*", "snapshots", "*", "config.json")))
    if not paths:
        raise OSError(f"no config.json under {hub}")
    with open(paths[0]) as handle:
        return handle.read()


def worker(index: int, mode: str) -> None:
    if mode == "short_helpers" and index == 1:
        sys.exit(1)  # no start-up work: not judged
    if mode == "slow_worker" and index == 1:
        time.sleep(1.0)
    if mode == "shuts_down" and index == 0:
        for delay in (0.1, 0.2, None):
            try:
                read_config()
                break
            except OSError:
                if delay is None:
                    raise
                time.sleep(delay)
    else:
        read_config()
    if index == 1 and mode in ("dies_before_ready", "gives_up", "shuts_down"):
        raise OSError(f"worker {index}: can't load the configuration: config.json vanished")
    if index == 1 and mode == "dies_after_ready":
        time.sleep(1.5)
        raise OSError(f"worker {index}: can't load the configuration: config.json vanished")
    if index == 2:
        return  # the compile helper: did its work, exits 0
    if mode == "exits_zero":
        print(f"worker {index}: config.json is unusable: exiting", flush=True)
        sys.exit(0)
    while True:
        time.sleep(1)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def serve(port: int) -> None:
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Health).serve_forever()


def main() -> None:
    port, mode = int(sys.argv[1]), sys.argv[2]
    context = multiprocessing.get_context("spawn")
    count = 3 if mode == "short_helpers" else 2
    # Daemonic: a supervisor that exits ends its workers (multiprocessing terminates them).
    workers = [context.Process(target=worker, args=(i, mode), daemon=True) for i in range(count)]
    for process in workers:
        process.start()
    if mode == "daemonizes":
        if os.fork() == 0:  # stays in the member's process group, as a daemon's child may
            serve(port)
        os._exit(0)
    if mode == "exits_zero":
        for process in workers:
            process.join()
        print("every worker exited: shutting down", flush=True)
        sys.exit(1)
    if mode == "gives_up":
        workers[1].join()
        print(f"worker {workers[1].pid} died with exit code {workers[1].exitcode}: giving up")
        sys.exit(0)
    threading.Thread(target=serve, args=(port,), daemon=True).start()
    print("supervisor serving", flush=True)
    if mode == "shuts_down":
        workers[1].join()
        time.sleep(1.0)
        print(f"worker {workers[1].pid} exited with code {workers[1].exitcode}: shutting down")
        sys.exit(1)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
