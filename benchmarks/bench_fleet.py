"""Fleet: 32 stub servers known ready, against a plain Popen-and-poll loop; teardown of 32 trees.

Each stub server is a Python process that starts a child (so it is a process tree), binds its
port and listens. The fleet starts them behind the start barrier and probes each with
``ready.tcp()``; the baseline starts the same command with ``subprocess.Popen`` and polls every
port until all accept a connection. Medians of interleaved repeats.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import Figure, emit, figure, parse_args

from pytest_startup_guard import ready
from pytest_startup_guard.fleet.ports import PortLeases
from pytest_startup_guard.fleet.reaper import Reaper
from pytest_startup_guard.fleet.server_fleet import ServerFleet
from pytest_startup_guard.runtime.controller import RuntimeController

STUB = (
    "import socket, subprocess, sys\n"
    "child = subprocess.Popen(['sleep', '600'])\n"
    "server = socket.socket(); server.bind(('127.0.0.1', int(sys.argv[1]))); server.listen()\n"
    "print('listening', flush=True)\n"
    "child.wait()\n"
)


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def plain_popen_and_poll(leases: PortLeases, count: int) -> tuple[float, float]:
    held = leases.lease(count)
    ports = [lease.port for lease in held]
    for lease in held:
        lease.release()  # the baseline has no leases: it just uses the ports
    env = {k: v for k, v in os.environ.items() if not k.startswith("STARTUP_GUARD_")}
    start = time.perf_counter()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", STUB, str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        for port in ports
    ]
    pending = set(ports)
    while pending:
        pending = {port for port in pending if not accepts(port)}
        if pending:
            time.sleep(0.01)
    known = time.perf_counter() - start
    stop_start = time.perf_counter()
    for process in processes:
        os.killpg(process.pid, 15)
    for process in processes:
        process.wait()
    return known, time.perf_counter() - stop_start


def with_fleet(
    base: Path, leases: PortLeases, reaper: Reaper, count: int, run: int
) -> tuple[float, float]:
    with RuntimeController() as controller:
        fleets = ServerFleet(controller, base / f"run-{run}", leases, reaper, default_timeout=120)
        start = time.perf_counter()
        fleet = fleets.launch(
            [sys.executable, "-c", STUB, "{port}"], count=count, ready=ready.tcp()
        )
        known = time.perf_counter() - start
        fleet.assert_all_ready()
        stop_start = time.perf_counter()
        fleet.stop()
        return known, time.perf_counter() - stop_start


def main() -> None:
    args = parse_args(__doc__ or "")
    count = 8 if args.quick else 32
    repeats = 1 if args.quick else 9
    base = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    leases = PortLeases(base / "ports")
    reaper = Reaper()
    fleet_known, fleet_stop, plain_known, plain_stop = [], [], [], []
    try:
        for run in range(repeats):  # interleaved, alternating which goes first
            for kind in ("fleet", "plain") if run % 2 else ("plain", "fleet"):
                if kind == "fleet":
                    known, stop = with_fleet(base, leases, reaper, count, run)
                    fleet_known.append(known)
                    fleet_stop.append(stop)
                else:
                    known, stop = plain_popen_and_poll(leases, count)
                    plain_known.append(known)
                    plain_stop.append(stop)
    finally:
        reaper.close()
        shutil.rmtree(base, ignore_errors=True)
    ratio = statistics.median(fleet_known) / statistics.median(plain_known)
    figures: list[Figure] = [
        figure(
            f"fleet: {count} stub servers known ready, server_fleet",
            1000 * statistics.median(fleet_known),
            "ms",
        ),
        figure(
            f"fleet: {count} stub servers known ready, Popen + poll",
            1000 * statistics.median(plain_known),
            "ms",
        ),
        figure(
            "fleet: time to all-ready, fleet / plain Popen",
            ratio,
            "x",
            target="<= 1.2",
            passed=ratio <= 1.2,
            detail=f"median of {repeats} interleaved runs; the fleet holds every member at the barrier, so all their own start-up work runs after the release",
        ),
        figure(
            f"fleet: teardown of {count} process trees (SIGTERM, 5 s grace)",
            1000 * statistics.median(fleet_stop),
            "ms",
            detail=f"plain killpg of the same trees: {1000 * statistics.median(plain_stop):.0f} ms",
        ),
    ]
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
