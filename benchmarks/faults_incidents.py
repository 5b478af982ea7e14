"""The faults that reach the public incidents (issue 28's): one recipe each, for bench_faults.

A recipe sets up one start-up of the examples' servers (``examples/faults.py``) with a fault:
the server that does not handle it (``unhandled``: caught, its first failure timed against a
clean start-up of the same fleet without the fault) and the servers that do (``handled``: each
raced start-up judged, a false alarm when the verdict fails). The verdict of a fault on what
processes do or on a picked port: the fault was met (``launch`` raises otherwise) and every
server became ready; of a rebuild case: ``StartupCase.check`` (the entry rebuilt, whole).
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench import EXAMPLES

from pytest_startup_guard import (
    fs_error,
    interleave,
    listen_late,
    lock_not_exclusive,
    network_fs,
    port_stolen,
    ready,
)
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.server_fleet import ServerFleet
from pytest_startup_guard.races.hubrace import HubRace
from pytest_startup_guard.verdicts.cases import CaseSpec, StartupCase

sys.path.insert(0, str(EXAMPLES))
sys.path.insert(0, str(EXAMPLES / "servers"))
from compile_cache_server import artifact_bytes, compile_kernel, is_whole
from faults import (
    KERNEL,
    cluster_server,
    codegen_server,
    compile_cache_server,
    locked_writer_server,
    probe_server,
    shared_fs_server,
)

TIMEOUT = 30.0  # readiness time-out of these fleets: a verdict never waits for it


@dataclass(frozen=True)
class Start:
    """One start-up to launch: the command, its faults, how many members."""

    argv: list[str]
    faults: list[object]
    count: int = 2
    rebuild: Path | None = None  # a rebuild case's entry, corrupted before the launch
    corruption: str = ""  # ... with this corruption (``FILE_CORRUPTIONS``)


Setup = Callable[[Path, str, bool], Start]  # (shared folder, policy, with the fault)


@dataclass(frozen=True)
class Recipe:
    name: str
    unhandled: str
    handled: tuple[str, ...]
    setup: Setup
    clean_policy: str | None = None  # the policy of the clean start-up (default: unhandled)


def _free_base() -> int:
    """A port where a scan can start: free now, as is (almost surely) the next one."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _fs_rename(shared: Path, policy: str, faulted: bool) -> Start:
    faults = [fs_error("ESTALE", shared / "kernels", op="rename")] if faulted else []
    return Start(shared_fs_server(shared, policy), faults)


def _fs_flock(shared: Path, policy: str, faulted: bool) -> Start:
    fault = fs_error("ENOSYS", shared / "kernels.lock", op="flock", times=None)
    return Start(shared_fs_server(shared, policy), [fault] if faulted else [])


def _network_fs(shared: Path, policy: str, faulted: bool) -> Start:
    (shared / "kernels").mkdir()
    (shared / "kernels" / "matmul.json").write_text(json.dumps(KERNEL))
    faults = list(network_fs(shared)) if faulted else []
    return Start(shared_fs_server(shared, policy, rotate_by=0), faults)


def _interleave(shared: Path, policy: str, faulted: bool) -> Start:
    header = shared / "generated.h"
    faults: list[object] = [
        interleave(header, first=(1, 1), then=(0, 2)),
        interleave(header, first=(0, 2), then=(1, 2)),
    ]
    return Start(codegen_server(shared, policy), faults if faulted else [])


def _listen_late(shared: Path, policy: str, faulted: bool) -> Start:
    return Start(cluster_server(policy), [listen_late(member=0)] if faulted else [], count=3)


def _port_stolen(bind: str) -> Setup:
    def setup(shared: Path, policy: str, faulted: bool) -> Start:
        faults = [port_stolen(member=1)] if faulted else []
        return Start(probe_server(policy, bind=bind), faults)

    return setup


def _port_stolen_scan(shared: Path, policy: str, faulted: bool) -> Start:
    faults = [port_stolen(member=0, by=1)] if faulted else []
    return Start(probe_server(policy, pick="scan", base=_free_base()), faults)


def _lock_not_exclusive(shared: Path, policy: str, faulted: bool) -> Start:
    faults = [lock_not_exclusive(shared / "download.lock")] if faulted else []
    return Start(locked_writer_server(shared, policy), faults)


def _rebuild(corruption: str) -> Setup:
    def setup(shared: Path, policy: str, faulted: bool) -> Start:
        cache = shared / "compile_cache"
        cache.mkdir()
        entry = cache / "matmul.artifact"
        entry.write_bytes(artifact_bytes(compile_kernel("matmul")))
        return Start(
            compile_cache_server(cache, policy),
            [],
            rebuild=entry if faulted else None,
            corruption=corruption,
        )

    return setup


RECIPES: tuple[Recipe, ...] = (
    Recipe("port_stolen", "die", ("retry",), _port_stolen("python")),
    Recipe("port_stolen_native", "die", ("retry",), _port_stolen("native")),
    # Two scans from one base collide on their own now and then (the incident itself): the
    # clean start-up is the retrying server's.
    Recipe("port_stolen_scan", "die", ("retry",), _port_stolen_scan, clean_policy="retry"),
    Recipe("fs_error_rename", "naive", ("retry",), _fs_rename),
    Recipe("fs_error_flock", "naive", ("retry",), _fs_flock),
    Recipe("network_fs", "naive", ("retry",), _network_fs),
    Recipe("interleave", "naive", ("atomic",), _interleave, clean_policy="atomic"),
    Recipe("listen_late", "naive", ("wait",), _listen_late, clean_policy="wait"),
    Recipe("lock_not_exclusive", "naive", ("safe",), _lock_not_exclusive),
    Recipe("rebuild_empty", "crash", ("rebuild",), _rebuild("empty")),
    Recipe("rebuild_garbage", "refuse", ("rebuild",), _rebuild("garbage")),
)


def launch(
    fleets: ServerFleet, start: Start, races: HubRace, seed: int
) -> tuple[Fleet, str | None]:
    """Launch ``start``; (the fleet, the first problem of its verdict or None)."""
    case = None
    if start.rebuild is not None:
        case = StartupCase(CaseSpec("rebuild", start.corruption), races, seed, "bench_faults")
        case.apply(start.rebuild)
    try:
        fleet = fleets.launch(
            start.argv,
            count=start.count,
            ready=ready.http("/health"),
            timeout=TIMEOUT,
            faults=start.faults,
        )
    except AssertionError as error:  # a fault never met
        raise FaultNotMet(str(error).splitlines()[0]) from error
    try:
        if case is not None:
            case.check(fleet, whole=is_whole)
        else:
            fleet.assert_all_ready()
    except AssertionError as error:
        lines = [line.strip() for line in str(error).splitlines()]
        return fleet, next((line[2:] for line in lines if line.startswith("- ")), lines[0])
    return fleet, None


class FaultNotMet(Exception):
    """The launch failed because a fault was never met: no verdict to judge."""
