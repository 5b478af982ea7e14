"""What the servers of the faults beyond the hub cache are expected to do, fault by fault.

Shared by ``test_shared_faults.py``, ``run_demo.py`` and ``benchmarks/bench_faults.py``: a
verdict the plugin observes must match this table. Each fault is shown on a server that does
not handle it (its verdict must fail: the fault is caught) and on one that does (it must pass).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

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

# The reason each row's verdict must show, as ``run_demo.py`` observes it (its ``observed``: the
# servers that did not start up, with their state, exit code, hits, reason and exception; the
# races and what they hit; the faults met): every regular expression of the row must match.
# Keyed by (row, policy), else by row, else by policy; a row that passes must show its fault met.
_RACED = (r"hit [1-9]\d*x on kernels/matmul\.json",)
_UP = (r"^2 of 2 up",)
_DIED = r"server \d exited with code 1\b"
_DIED_ON_RACE = (_DIED + r".*, [1-9]\d* hits?\b", *_RACED)
_BUSY = r": OSError: \[Errno 98\] Address already in use"
_STALE = r": OSError: \[Errno 116\] Stale file handle"
REASON: dict[str | tuple[str, str], tuple[str, ...]] = {
    ("file_replace", "naive"): (*_DIED_ON_RACE, r": FileNotFoundError: .*kernels/matmul\.json"),
    ("folder_move", "naive"): (*_DIED_ON_RACE, r": FileNotFoundError: .*kernels/matmul\.json"),
    ("file_rewrite", "naive"): (*_DIED_ON_RACE, r": JSONDecodeError: "),
    ("partial_write", "naive"): (*_DIED_ON_RACE, r": JSONDecodeError: "),
    "file_replace": (*_UP, *_RACED, r"2 absorbed it"),
    "file_rewrite": (*_UP, *_RACED, r"2 absorbed it"),
    "partial_write": (*_UP, *_RACED, r"2 absorbed it"),
    "folder_move": (*_UP, *_RACED, r"2 absorbed it"),
    ("stale_lock", "wait"): (
        r"server \d hung, [1-9]\d* hits",
        r"hung on the stale lock \S*build/lock",
    ),
    ("stale_lock", "fail"): (r"^0 of 2 up", _DIED, r"stale_lock hit [1-9]\d*x on build/lock"),
    ("stale_lock", "break"): (*_UP, r"stale_lock hit [1-9]\d*x on build/lock", r"2 absorbed it"),
    "stale_soft_lock": (*_UP, r"hit [1-9]\d*x on build/lock", r"2 absorbed it"),
    ("port_taken", "die"): (
        _DIED + _BUSY,
        r"port \d+ was taken by the port_taken fault on member 1",
    ),
    ("same_port", "die"): (_DIED + _BUSY, r"member 1 was told the same port \d+ as member 0"),
    ("port_stolen", "die"): (_DIED + _BUSY, r"which member 1 picked itself, was taken"),
    ("port_stolen_native", "die"): (
        _DIED + _BUSY + r" \(native bind",
        r"which member 1 picked itself, was taken",
    ),
    ("port_stolen_scan", "die"): (
        _DIED + _BUSY,
        r"member 1 picked port \d+, which member 0 had picked too",
    ),
    "port_taken": (*_UP, r"port_taken met"),
    "same_port": (*_UP, r"same_port met"),
    "port_stolen": (*_UP, r"port_stolen met"),
    "port_stolen_native": (*_UP, r"port_stolen met"),
    "port_stolen_scan": (*_UP, r"port_stolen met"),
    ("fs_error_rename", "naive"): (_DIED + _STALE, r"its rename \S*kernels/matmul\.json"),
    ("fs_error_flock", "naive"): (
        _DIED + r": OSError: \[Errno 38\]",
        r"its flock \S*kernels\.lock",
    ),
    ("network_fs", "naive"): (_DIED + _STALE, r"its open of \S*kernels/matmul\.json"),
    "fs_error_rename": (*_UP, r"fs_error met"),
    "fs_error_flock": (*_UP, r"fs_error met"),
    "network_fs": (*_UP, r"network_fs met"),
    ("interleave", "naive"): (
        _DIED + r": it ran interleaved with another member by interleave\('\S*generated\.h",
    ),
    "interleave": (*_UP, r"interleave met.*interleave met"),
    ("listen_late", "naive"): (
        _DIED + r": it tried to connect to member 0's port \d+ .*before that member listened",
    ),
    "listen_late": (r"^3 of 3 up", r"listen_late met"),
    ("lock_not_exclusive", "naive"): (
        _DIED + r": lock_not_exclusive: it held the lock \S*download\.lock",
    ),
    "lock_not_exclusive": (*_UP, r"lock_not_exclusive met"),
    ("lock_held", "timeout"): (
        _DIED + r", [1-9]\d* hits",
        r"lock_held hit [1-9]\d*x on download\.lock",
    ),
    "lock_held": (*_UP, r"lock_held hit [1-9]\d*x on download\.lock", r"2 absorbed it"),
    ("lock_held_for_good", "wait"): (
        r"server \d hung, [1-9]\d* hits",
        r"hung on the held lock \S*download\.lock",
    ),
    "lock_held_for_good": (
        r"^0 of 2 up",
        _DIED + r", [1-9]\d* hits",
        r"lock_held_for_good hit [1-9]\d*x on download\.lock",
    ),
    "crash": (
        _DIED + r": (JSONDecodeError|UnicodeDecodeError): ",
        r"crashed on the corrupt cache entry \S*matmul\.artifact",
    ),
    "refuse": (_DIED, r"failed closed on the corrupt cache entry \S*matmul\.artifact"),
    "ignore": (*_UP, r"every member became ready, but the corrupt cache entry \S*matmul\.artifact"),
    "rebuild": (*_UP, r"expected to rebuild: held"),
    ("native_folder_move", "naive"): (
        _DIED + r", 1 of 1 workers failed with code \d+, [1-9]\d* hits?",
        r": ninja: error: opening build log: No such file or directory",
        r"folder_move hit [1-9]\d*x on build/\.ninja_log",
    ),
    "native_folder_move": (
        *_UP,
        r"folder_move hit [1-9]\d*x on build/\.ninja_log",
        r"2 absorbed it",
    ),
}


def reason(row: str, policy: str) -> tuple[str, ...]:
    """The regular expressions a row's observed reason must match (see ``REASON``)."""
    return REASON.get((row, policy)) or REASON.get(row) or REASON[policy]


def faults_met(fleet: Any) -> str:
    """Which of a fleet's faults were met, for a test's ``caught`` property: the JSON report
    names its port faults, and this names the others (``fs_error met (2 effects)``)."""
    return "; ".join(
        f"{fault.describe().split('(')[0]} {'met' if fault.met else 'never met'}"
        f" ({len(fault.effects)} effects)"
        for fault in fleet.faults
    )


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
