"""A WSGI app that loads its model's config when it is imported, for ``gunicorn -w``.

    REPO_ID=acme/tiny [RETRY=1] [SWALLOW=1] gunicorn -w 4 -k sync --chdir examples/servers \\
        -b 127.0.0.1:8000 wsgi_app:app

``gunicorn -w 4`` (without ``--preload``) binds the socket in its arbiter and forks four
workers; each imports this module before it accepts, so each reads the cache on its own, at the
same moment as its siblings. At import:
``transformers.AutoConfig.from_pretrained(os.environ["REPO_ID"])`` (offline, from ``HF_HOME``),
with ``RETRY=1`` tried 3 times, 0.1 s then 0.2 s apart. It serves ``GET /health`` (200 ``ok``)
and ``GET /config`` (the ``model_type`` and the worker's pid, as JSON).

A failed load is not caught: the import fails, gunicorn logs ``Exception in worker process``
with the traceback, the worker exits with code 3 (``WORKER_BOOT_ERROR``: it never booted) and
the arbiter halts the whole server (``Reason: Worker failed to boot.``, exit code 3) rather
than respawn a worker that cannot boot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from worker_config import load_config  # the shared config load and realistic retry

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment


def config_of_this_worker() -> dict[str, Any]:
    """The config of ``$REPO_ID``, retried when ``RETRY=1``, a failure hidden when ``SWALLOW=1``."""
    return load_config(
        os.environ["REPO_ID"],
        retry=os.environ.get("RETRY") == "1",
        swallow=os.environ.get("SWALLOW") == "1",
    )


CONFIG = config_of_this_worker()  # at import: in each worker, since the app is not preloaded
print(f"worker pid {os.getpid()} loaded {CONFIG.get('model_type')}", flush=True)


def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "")
    if path == "/health":
        status, body, content_type = "200 OK", b"ok", "text/plain"
    elif path == "/config":
        payload = {"model_type": CONFIG.get("model_type"), "pid": os.getpid()}
        status, body, content_type = "200 OK", json.dumps(payload).encode(), "application/json"
    else:
        status, body, content_type = "404 Not Found", b'{"error": "not found"}', "application/json"
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]
