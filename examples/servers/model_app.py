"""The model server as an ASGI app: each ``uvicorn --workers`` worker loads the model in its
lifespan start-up.

    REPO_ID=acme/stack [RETRY=1] [WEIGHTS=model.safetensors.index.json] [EXPECT='{...}'] \\
        uvicorn model_app:app --app-dir examples/servers --host 127.0.0.1 --port 8000 --workers 2

The load is ``model_server.py``'s (config, tokenizer, weights; with ``RETRY=1`` the bounded,
jittered retry of the whole load; ``EXPECT``: what the worker must have loaded), and so are
the lines each worker says about it (``pid N: load error on FILE: ...``, ``pid N: loaded ...``,
``pid N: failed to load ...``, also appended to ``$LOAD_LOG``). A failed load is reported as
Starlette and FastAPI report it (``asgi_app.py`` says why): a ``lifespan.startup.failed``
message (here the line that says why, after the traceback), then the exception again; the
worker exits with code 3.

``GET /health``: 200 ``ok``; ``GET /config``: what the worker loaded and its pid, as JSON.
"""

from __future__ import annotations

import json
import os
from typing import Any

from asgi_app import Receive, Send, reply  # the plain-ASGI plumbing of the config app
from model_server import WEIGHTS, give_up, load

# What this worker loaded, once its lifespan start-up loaded it.
LOADED: dict[str, Any] = {}


def model_of_this_worker() -> dict[str, Any]:
    expect = os.environ.get("EXPECT")
    return load(
        os.environ["REPO_ID"],
        "retry" if os.environ.get("RETRY") == "1" else "naive",
        os.environ.get("WEIGHTS", WEIGHTS),
        json.loads(expect) if expect else None,
    )


async def lifespan(receive: Receive, send: Send) -> None:
    message = await receive()
    assert message["type"] == "lifespan.startup"
    try:
        LOADED.update(model_of_this_worker())
    except Exception:
        await send({"type": "lifespan.startup.failed", "message": give_up(os.environ["REPO_ID"])})
        raise
    await send({"type": "lifespan.startup.complete"})
    message = await receive()
    assert message["type"] == "lifespan.shutdown"
    await send({"type": "lifespan.shutdown.complete"})


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
    elif scope["type"] == "http":
        if scope["path"] == "/health":
            await reply(send, 200, b"ok", "text/plain")
        elif scope["path"] == "/config":
            body = json.dumps({**LOADED, "pid": os.getpid()}).encode()
            await reply(send, 200, body, "application/json")
        else:
            await reply(send, 404, b'{"error": "not found"}', "application/json")
