"""A small real API server that loads its model's config from the Hugging Face cache at start-up.

    python config_server.py --model acme/tiny --port 8000 [--policy POLICY] [--loader LOADER]

It serves ``GET /health`` (200 once the config is loaded) and ``GET /config`` (the config it
loaded, as JSON). How it loads is what the bundled tests put under race:

- ``--loader autoconfig``: ``transformers.AutoConfig.from_pretrained`` (the incident's path);
- ``--loader hub_json``: ``huggingface_hub.hf_hub_download`` + ``json.load``, with a check that
  the config names its ``model_type``.

and what it does when loading fails:

- ``naive``: nothing: it dies (a transient race kills it);
- ``retry``: a bounded, jittered retry that re-raises at the end (the incident's fix);
- ``swallow``: catches everything and serves a default config (hides a corrupt config);
- ``slow_retry``: retries forever (hangs on a corrupt config instead of failing).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_CONFIG = {"model_type": "gpt2", "fallback": True}


def load_autoconfig(model: str) -> dict[str, Any]:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(model).to_dict()


def load_hub_json(model: str) -> dict[str, Any]:
    from huggingface_hub import hf_hub_download

    path = hf_hub_download(model, "config.json")
    with open(path) as handle:
        config = json.load(handle)
    if not isinstance(config, dict) or "model_type" not in config:
        raise ValueError(f"{path}: the config of {model} has no model_type")
    return config


def with_retry(
    func: Callable[[], Any], msg: str, max_retries: int = 4, retry_delay: float = 0.1
) -> Any:
    """Retry any exception, the delay doubling with jitter; re-raise after the last attempt."""
    for attempt in range(max_retries + 1):
        try:
            return func()
        except Exception as error:
            if attempt == max_retries:
                raise
            delay = retry_delay * (2**attempt) * random.uniform(0.5, 1.5)
            print(f"{msg}: {type(error).__name__}: {error}; retrying in {delay:.2f} s", flush=True)
            time.sleep(delay)
    raise AssertionError("unreachable")


def load(model: str, loader: str, policy: str) -> dict[str, Any]:
    read = {"autoconfig": load_autoconfig, "hub_json": load_hub_json}[loader]
    if policy == "naive":
        return read(model)
    if policy == "retry":
        return with_retry(lambda: read(model), f"loading the config of {model}")
    if policy == "swallow":
        try:
            return read(model)
        except Exception:  # the bug: a broken config becomes a default one
            return dict(DEFAULT_CONFIG)
    if policy == "slow_retry":
        while True:  # the bug: a broken config becomes a hang
            try:
                return read(model)
            except Exception as error:
                print(f"still waiting for the config of {model}: {error!r}", flush=True)
                time.sleep(0.2)
    raise ValueError(f"unknown policy {policy!r}")


def serve(config: dict[str, Any], port: int) -> None:
    body = json.dumps(config, sort_keys=True).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self._reply(200, b'{"status": "ok"}')
            elif self.path == "/config":
                self._reply(200, body)
            else:
                self._reply(404, b'{"error": "not found"}')

        def _reply(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"serving {config.get('model_type')} on http://127.0.0.1:{port}", flush=True)
    server.serve_forever()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loader", choices=("autoconfig", "hub_json"), default="autoconfig")
    parser.add_argument(
        "--policy", choices=("naive", "retry", "swallow", "slow_retry"), default="naive"
    )
    args = parser.parse_args()
    try:
        config = load(args.model, args.loader, args.policy)
    except Exception:
        traceback.print_exc()
        print(f"server failed to start: could not load the config of {args.model}", file=sys.stderr)
        return 1
    serve(config, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
