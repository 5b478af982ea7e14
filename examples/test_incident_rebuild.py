"""Caches must rebuild: a corrupt compile-cache entry, as vllm-project/vllm#35061 met it.

    pytest -p startup_guard examples/test_incident_rebuild.py

A 0-byte compile-cache file made every restart of vLLM fail: the entry was loaded, not rebuilt.
Each test here is one server policy (``servers/compile_cache_server.py``) under one corruption of
its cache entry (``FILE_CORRUPTIONS``: ``empty``, ``truncated``, ``garbage``), judged by the
rebuild verdict: every server must come up *and* leave the entry whole. ``faults.EXPECTED``
(rows ``rebuild_<corruption>``) says which pass: the server that crashes on the entry, the one
that refuses to start (failing closed, right for a config, wrong for a cache) and the one that
comes up around it but leaves it for the next start all fail; the one that rebuilds it passes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from faults import SERVERS, compile_cache_server

from pytest_startup_guard import ServerFleet, StartupCase, ready

sys.path.insert(0, str(SERVERS))  # the server's own format, to fill the cache and judge it
from compile_cache_server import artifact_bytes, compile_kernel, is_whole

COUNT = int(os.environ.get("ZOO_SERVERS", "2"))
TIMEOUT = float(os.environ.get("ZOO_TIMEOUT", "8"))


@pytest.mark.startup_races(rebuild="all")
@pytest.mark.parametrize("policy", ["crash", "refuse", "ignore", "rebuild"])
def test_compile_cache(
    startup_case: StartupCase, shared_dir: Path, server_fleet: ServerFleet, policy: str
) -> None:
    cache = shared_dir / "compile_cache"
    cache.mkdir()
    entry = cache / "matmul.artifact"
    entry.write_bytes(artifact_bytes(compile_kernel("matmul")))  # a start-up filled the cache
    startup_case.apply(entry)  # then a crash left the entry broken
    fleet = server_fleet.launch(
        compile_cache_server(cache, policy),
        count=COUNT,
        ready=ready.http("/health"),
        timeout=TIMEOUT,
    )
    startup_case.check(fleet, whole=is_whole)  # whole: a valid artifact, not just other bytes
