"""What the servers of the faults beyond the hub cache are expected to do, fault by fault.

Shared by ``test_shared_faults.py``, ``run_demo.py`` and ``benchmarks/bench_faults.py``: a
verdict the plugin observes must match this table. Each fault is shown on a server that does
not handle it (its verdict must fail: the fault is caught) and on one that does (it must pass).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SERVERS = Path(__file__).resolve().parent / "servers"

# The example tests of the faults beyond the hub cache. Each test's id names its kind, the
# fault (a row of EXPECTED, see ``row_of``) and the server's policy: ``[port-same_port-die]``.
FAULT_FILES = (
    "test_shared_faults.py",
    "test_incident_ports.py",
    "test_incident_fs.py",
    "test_incident_order.py",
    "test_incident_locks.py",
    "test_incident_rebuild.py",
    "test_incident_native.py",
)
FAULT_ID = re.compile(r"\[(transient|stale|port|fs|order|lock|rebuild|native)-(\w+)-(\w+)\]")


def row_of(kind: str, fault: str) -> str:
    """The row of EXPECTED a test id's kind and fault name: a rebuild case is named by its
    corruption, a native case by its race."""
    return f"{kind}_{fault}" if kind in ("rebuild", "native") else fault


# A compile cache entry the kernel server loads at start-up.
KERNEL = {"kernel": "matmul", "blocks": list(range(64))}

# fault -> {policy: expected verdict}; "pass" when the case's verdict holds.
EXPECTED: dict[str, dict[str, str]] = {
    "file_replace": {"naive": "fail", "retry": "pass"},
    "file_rewrite": {"naive": "fail", "retry": "pass"},
    "partial_write": {"naive": "fail", "retry": "pass"},
    "folder_move": {"naive": "fail", "retry": "pass"},
    "stale_lock": {"wait": "fail", "fail": "pass", "break": "pass"},
    "stale_soft_lock": {"soft": "pass"},
    "port_taken": {"die": "fail", "retry": "pass"},
    "same_port": {"die": "fail", "other_port": "pass"},
    # ports a server picks itself (rows below this line)
    "port_stolen": {"die": "fail", "retry": "pass"},
    "port_stolen_native": {"die": "fail", "retry": "pass"},
    "port_stolen_scan": {"die": "fail", "retry": "pass"},
    # file-system errors (rows below this line)
    "fs_error_rename": {"naive": "fail", "retry": "pass"},
    "fs_error_flock": {"naive": "fail", "retry": "pass"},
    "network_fs": {"naive": "fail", "retry": "pass"},
    "interleave": {"naive": "fail", "atomic": "pass"},
    "listen_late": {"naive": "fail", "wait": "pass"},
    # locks anywhere (rows below this line)
    "lock_not_exclusive": {"naive": "fail", "safe": "pass"},
    "lock_held": {"wait": "pass", "timeout": "fail"},
    "lock_held_for_good": {"wait": "fail", "timeout": "pass"},
    # caches that must rebuild (rows below this line)
    "rebuild_empty": {"crash": "fail", "refuse": "fail", "ignore": "fail", "rebuild": "pass"},
    "rebuild_truncated": {"crash": "fail", "refuse": "fail", "ignore": "fail", "rebuild": "pass"},
    "rebuild_garbage": {"crash": "fail", "refuse": "fail", "ignore": "fail", "rebuild": "pass"},
    # accesses made in native code (rows below this line)
    "native_folder_move": {"naive": "fail", "retry": "pass"},
}

# Why a server that fails its case does, by policy; a (row, policy) key says it for one row.
WHY: dict[str | tuple[str, str], str] = {
    "naive": "dies on the race",
    "wait": "waits forever on the stale lock",
    "die": "dies on the busy port",
    # ports a server picks itself (reasons below this line)
    # file-system errors (reasons below this line)
    ("fs_error_rename", "naive"): "dies of the stale handle on its rename",
    ("fs_error_flock", "naive"): "dies where flock is not implemented",
    ("network_fs", "naive"): "dies of the stale handle after the other member's move",
    ("interleave", "naive"): "both append: a duplicate definition",
    ("listen_late", "naive"): "joins the head once, before it listens",
    ("native_folder_move", "naive"): "the native build opens its log once",
    ("lock_held_for_good", "wait"): "waits forever on a lock nobody releases",
    ("lock_not_exclusive", "naive"): "writes where another holder writes",
    # locks anywhere (reasons below this line)
    "timeout": "gives up on a lock its holder releases a moment later",
    # caches that must rebuild (reasons below this line)
    "crash": "dies loading the corrupt cache entry",
    "refuse": "fails closed on a cache entry it could rebuild",
    "ignore": "comes up but leaves the corrupt entry for the next start",
}


def kernel_server(cache: Path, policy: str) -> list[str]:
    return [
        sys.executable,
        str(SERVERS / "cache_server.py"),
        "--port",
        "{port}",
        "--cache",
        str(cache),
        "--policy",
        policy,
    ]


def lock_server(build: Path, policy: str) -> list[str]:
    style = ["--style", "soft"] if policy == "soft" else ["--on-stale", policy]
    return [
        sys.executable,
        str(SERVERS / "lock_server.py"),
        "--port",
        "{port}",
        "--build",
        str(build),
        "--lock-timeout",
        "1",
        *style,
    ]


def port_server(policy: str) -> list[str]:
    return [
        sys.executable,
        str(SERVERS / "port_server.py"),
        "--port",
        "{port}",
        "--on-busy",
        policy.replace("_", "-"),
    ]


def compile_cache_server(cache: Path, policy: str) -> list[str]:
    """The compile-cache server (``servers/compile_cache_server.py``) on ``cache``: its entry
    is ``cache/matmul.artifact``."""
    return [
        sys.executable,
        str(SERVERS / "compile_cache_server.py"),
        "--port",
        "{port}",
        "--cache",
        str(cache),
        "--policy",
        policy,
    ]


def shared_fs_server(cache: Path, policy: str, *, rotate_by: int | None = None) -> list[str]:
    rotate = [] if rotate_by is None else ["--rotate-by", str(rotate_by)]
    return [
        sys.executable,
        str(SERVERS / "shared_fs_server.py"),
        "--port",
        "{port}",
        "--cache",
        str(cache),
        "--policy",
        policy,
        "--index",
        "{index}",
        "--count",
        "{count}",
        *rotate,
    ]


def probe_server(policy: str, pick: str = "zero", bind: str = "python", base: int = 0) -> list[str]:
    """The server that picks its store's port itself (``port_stolen``); ``base``: a scan's."""
    scan = ["--base", str(base)] if pick == "scan" else []
    return [
        sys.executable,
        str(SERVERS / "probe_server.py"),
        "--port",
        "{port}",
        "--pick",
        pick,
        *scan,
        "--bind",
        bind,
        "--on-busy",
        policy,
    ]


def codegen_server(workspace: Path, policy: str) -> list[str]:
    return [
        sys.executable,
        str(SERVERS / "codegen_server.py"),
        "--port",
        "{port}",
        "--workspace",
        str(workspace),
        "--policy",
        policy,
    ]


def cluster_server(policy: str) -> list[str]:
    return [
        sys.executable,
        str(SERVERS / "cluster_server.py"),
        "--port",
        "{port}",
        "--index",
        "{index}",
        "--head-port",
        "{port0}",
        "--policy",
        policy,
    ]


def native_build_tool(folder: Path) -> Path:
    """The bundled native build step (``servers/native_build.c``), compiled into ``folder``
    with the system's C compiler (``$CC``, else ``cc``) unless it is there already."""
    import os
    import shlex
    import subprocess

    tool = folder / "native_build"
    if not tool.exists():
        folder.mkdir(parents=True, exist_ok=True)
        compiler = shlex.split(os.environ.get("CC") or "cc")
        partial = folder / f".native_build.{os.getpid()}"
        subprocess.run(
            [*compiler, "-O2", "-o", str(partial), str(SERVERS / "native_build.c")], check=True
        )
        os.replace(partial, tool)
    return tool


def native_build_server(build: Path, tool: Path, policy: str) -> list[str]:
    """The server that runs the native build step ``tool`` in ``build`` at start-up."""
    return [
        sys.executable,
        str(SERVERS / "native_build_server.py"),
        "--port",
        "{port}",
        "--build",
        str(build),
        "--tool",
        str(tool),
        "--policy",
        policy,
    ]


def locked_writer_server(
    folder: Path, policy: str, *, lock: str = "flock", lock_timeout: float = 1.0
) -> list[str]:
    """The server that downloads its model under ``folder/download.lock``: ``naive`` or
    ``safe`` (how it downloads), ``wait`` or ``timeout`` (what it does on a held lock)."""
    on_held = ["--on-held", policy] if policy in ("wait", "timeout") else []
    how = ["--policy", policy] if policy in ("naive", "safe") else []
    return [
        sys.executable,
        str(SERVERS / "locked_writer_server.py"),
        "--port",
        "{port}",
        "--folder",
        str(folder),
        "--lock",
        lock,
        "--lock-timeout",
        str(lock_timeout),
        *how,
        *on_held,
    ]
