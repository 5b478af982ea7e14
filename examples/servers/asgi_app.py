"""An ASGI app that loads its model's config in its lifespan start-up, for ``uvicorn --workers``.

    REPO_ID=acme/tiny [RETRY=1] [SWALLOW=1] uvicorn asgi_app:app --app-dir examples/servers \\
        --host 127.0.0.1 --port 8000 --workers 4

``uvicorn --workers 4`` binds the socket in a supervisor and spawns four workers that share it;
each worker imports this module and runs the ASGI lifespan before it accepts, so each reads the
cache on its own, at the same moment as its siblings. The app is plain ASGI (no framework):

- lifespan start-up: ``transformers.AutoConfig.from_pretrained(os.environ["REPO_ID"])``
  (offline, from ``HF_HOME``); with ``RETRY=1`` tried 3 times, 0.1 s then 0.2 s apart;
- ``GET /health``: 200 ``ok``; ``GET /config``: the ``model_type`` and the worker's pid, as JSON.

A failed load is reported the way Starlette and FastAPI report it: the traceback goes in a
``lifespan.startup.failed`` message, then the exception is re-raised. uvicorn logs the message
(``Application startup failed. Exiting.``) and the worker exits with code 3 (uvicorn's
``STARTUP_FAILURE``). Re-raising alone would not do: under uvicorn's default ``--lifespan auto``
an exception before the start-up completed reads as "lifespan unsupported", and the worker
would serve without a config.
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from worker_config import load_config  # the shared config load and realistic retry

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


# This worker's config, once its lifespan start-up loaded it.
CONFIG: dict[str, Any] = {}


def config_of_this_worker() -> dict[str, Any]:
    """The config of ``$REPO_ID``, retried when ``RETRY=1``, a failure hidden when ``SWALLOW=1``."""
    return load_config(
        os.environ["REPO_ID"],
        retry=os.environ.get("RETRY") == "1",
        swallow=os.environ.get("SWALLOW") == "1",
    )


async def lifespan(receive: Receive, send: Send) -> None:
    message = await receive()
    assert message["type"] == "lifespan.startup"
    try:
        CONFIG.update(config_of_this_worker())
    except BaseException:
        await send({"type": "lifespan.startup.failed", "message": traceback.format_exc()})
        raise
    print(f"worker pid {os.getpid()} loaded {CONFIG.get('model_type')}", flush=True)
    await send({"type": "lifespan.startup.complete"})
    message = await receive()
    assert message["type"] == "lifespan.shutdown"
    await send({"type": "lifespan.shutdown.complete"})


async def reply(send: Send, status: int, body: bytes, content_type: str) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
    elif scope["type"] == "http":
        if scope["path"] == "/health":
            await reply(send, 200, b"ok", "text/plain")
        elif scope["path"] == "/config":
            body = {"model_type": CONFIG.get("model_type"), "pid": os.getpid()}
            await reply(send, 200, json.dumps(body).encode(), "application/json")
        else:
            await reply(send, 404, b'{"error": "not found"}', "application/json")
