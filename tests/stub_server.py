"""A tiny HTTP server that loads its config straight from the hub layout, for fast fleet tests.

    python stub_server.py POLICY PORT REPO_ID [FIRST_RUN_MARKER]

It opens ``refs/main``, then ``snapshots/<commit>/config.json`` (the accesses races trigger on)
and serves the config it loaded at every path. POLICY is what it does when loading fails:
``naive`` exits 1 naming the file and repo; ``retry`` tries 40 times, 50 ms apart, then does
the same; ``realistic_retry`` tries 3 times, sleeping 0.1 s then 0.2 s, then does the same;
``swallow`` serves a fallback config; ``slow_retry`` retries forever; ``quiet_naive`` exits 1
saying nothing; ``ignores_cache`` never reads the cache at all. With
FIRST_RUN_MARKER, a start-up that finds no file there creates it and reads its config once more:
the first start-up makes one access more than every later one.
"""

import http.server
import json
import os
import sys
import time

policy, port, repo = sys.argv[1], int(sys.argv[2]), sys.argv[3]
first_run_marker = sys.argv[4] if len(sys.argv) > 4 else None
folder = os.path.join(os.environ["HF_HUB_CACHE"], "models--" + repo.replace("/", "--"))


def load():
    with open(os.path.join(folder, "refs", "main")) as ref:
        commit = ref.read()
    with open(os.path.join(folder, "snapshots", commit, "config.json")) as handle:
        config = json.load(handle)
    if "model_type" not in config:
        raise ValueError("no model_type")
    if first_run_marker is not None and not os.path.exists(first_run_marker):
        open(first_run_marker, "w").close()
        with open(os.path.join(folder, "snapshots", commit, "config.json")) as handle:
            handle.read()
    return config


def start():
    if policy == "ignores_cache":
        return {"model_type": "gpt2"}
    attempts = {"retry": 40, "slow_retry": 10**9, "realistic_retry": 3}.get(policy, 1)
    for attempt in range(attempts):
        try:
            return load()
        except Exception as error:
            if policy == "swallow":
                return {"model_type": "fallback"}
            if policy == "quiet_naive":
                sys.exit(1)
            if attempt == attempts - 1:
                print(f"cannot load config.json of {repo}: {error!r}", flush=True)
                sys.exit(1)
            time.sleep(0.1 * 2**attempt if policy == "realistic_retry" else 0.05)


body = json.dumps(start()).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
