"""What every worker of the three worker topologies does first: load its model's config.

``launcher_server.py`` (vLLM-style API servers), ``asgi_app.py`` (uvicorn workers) and
``wsgi_app.py`` (gunicorn workers) each import this from their own folder, as
``config_server.py``'s retry is shared by the other single-process servers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# A realistic retry: a few attempts, short and growing pauses (the pauses between attempts).
RETRY_DELAYS = (0.1, 0.2)


def with_retry(func: Callable[[], T], what: str, delays: tuple[float, ...] = RETRY_DELAYS) -> T:
    """Call ``func``; on any exception, wait and try again, once per delay; re-raise the last.

    A transient race on the cache lasts milliseconds: a short retry rides it out, and a config
    that stays broken still fails, after ``sum(delays)`` seconds, with its own exception."""
    for delay in delays:
        try:
            return func()
        except Exception as error:
            print(f"{what}: {type(error).__name__}: {error}; retrying in {delay} s", flush=True)
            time.sleep(delay)
    return func()


# What a worker that swallows a failed load serves instead (it hides a corrupt config).
FALLBACK: dict[str, Any] = {"model_type": "fallback"}


def load_config(repo: str, retry: bool, swallow: bool = False) -> dict[str, Any]:
    """The model's config, read as vLLM reads it: ``AutoConfig.from_pretrained``, offline.

    ``swallow``: a failed load is printed and ``FALLBACK`` served instead (the bug that hides a
    corrupt config: the worker comes up anyway)."""
    from transformers import AutoConfig

    def read() -> dict[str, Any]:
        config: dict[str, Any] = AutoConfig.from_pretrained(repo).to_dict()
        return config

    try:
        return with_retry(read, f"loading the config of {repo}") if retry else read()
    except Exception as error:
        if not swallow:
            raise
        print(f"loading the config of {repo} failed ({type(error).__name__}): using a default")
        return dict(FALLBACK)
