"""Fleet: 32 stub servers known ready, against two Popen-and-poll loops; teardown of 32 trees.

Each stub server is a Python process that starts a child (so it is a process tree), binds its
port and listens. The fleet starts them behind the start barrier and probes each with
``ready.tcp()``. Two baselines start the same command with ``subprocess.Popen`` and poll every
port until all accept a connection:

- plain: each process runs as soon as it is started, so the first ones work while the last
  ones are still being started;
- together: what a fleet is for: each process waits at a gate (a pipe) once its interpreter is
  up, and all go at once when the last one has arrived, as the fleet's start barrier does.

Medians of interleaved repeats, the three kinds in a rotating order.
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
from pytest_startup_guard.fleet.launcher import FleetLauncher
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


def until_all_accept(
    ports: list[int], processes: list[subprocess.Popen[bytes]], start: float
) -> tuple[float, float]:
    """Poll every port until all accept; then end the process trees. (known ready, teardown)."""
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
    return until_all_accept(ports, processes, start)


GATED = (
    "import os, sys\n"
    "os.write(int(sys.argv[2]), b'.')\n"  # arrived: the interpreter is up
    "os.read(int(sys.argv[3]), 1)\n"  # wait at the gate until all go
    "sys.argv = sys.argv[:2]\n"
    "exec(compile(STUB, '<stub>', 'exec'))\n"
)


def together_popen_and_poll(leases: PortLeases, count: int) -> tuple[float, float]:
    """Start every process, wait until each is at the gate, open it, poll every port."""
    held = leases.lease(count)
    ports = [lease.port for lease in held]
    for lease in held:
        lease.release()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STARTUP_GUARD_")}
    arrived_read, arrived_write = os.pipe()
    gate_read, gate_write = os.pipe()
    code = f"STUB = {STUB!r}\n" + GATED
    start = time.perf_counter()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(port), str(arrived_write), str(gate_read)],
            env=env,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=(arrived_write, gate_read),
        )
        for port in ports
    ]
    os.close(arrived_write)
    os.close(gate_read)
    arrived = 0
    while arrived < count:
        arrived += len(os.read(arrived_read, count))
    os.write(gate_write, b"x" * count)
    try:
        return until_all_accept(ports, processes, start)
    finally:
        os.close(arrived_read)
        os.close(gate_write)


def with_fleet(
    base: Path, leases: PortLeases, reaper: Reaper, count: int, run: int
) -> tuple[float, float]:
    with RuntimeController() as controller:
        fleets = ServerFleet(
            FleetLauncher(controller, base / f"run-{run}", leases, reaper, default_timeout=120)
        )
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
    known: dict[str, list[float]] = {"fleet": [], "plain": [], "together": []}
    fleet_stop, plain_stop = [], []
    kinds = ("fleet", "plain", "together")
    try:
        for run in range(repeats):  # interleaved, rotating which goes first
            for kind in kinds[run % 3 :] + kinds[: run % 3]:
                if kind == "fleet":
                    seconds, stop = with_fleet(base, leases, reaper, count, run)
                    fleet_stop.append(stop)
                elif kind == "plain":
                    seconds, stop = plain_popen_and_poll(leases, count)
                    plain_stop.append(stop)
                else:
                    seconds, _stop = together_popen_and_poll(leases, count)
                known[kind].append(seconds)
    finally:
        reaper.close()
        shutil.rmtree(base, ignore_errors=True)
    median = {kind: statistics.median(values) for kind, values in known.items()}

    def spread(kind: str) -> str:
        return f"{1000 * min(known[kind]):.0f} to {1000 * max(known[kind]):.0f} ms"

    figures: list[Figure] = [
        figure(
            f"fleet: {count} stub servers known ready, {name}",
            1000 * median[kind],
            "ms",
            detail=f"spread {spread(kind)}",
        )
        for kind, name in (
            ("fleet", "server_fleet"),
            ("plain", "Popen + poll"),
            ("together", "Popen at a gate + poll"),
        )
    ]
    together = median["fleet"] / median["together"]
    plain = median["fleet"] / median["plain"]
    figures += [
        figure(
            "fleet: time to all-ready, fleet / Popen started together",
            together,
            "x",
            target="<= 1.2",
            passed=together <= 1.2,
            detail=f"median of {repeats} interleaved runs; both hold every member until all are"
            " up, then let them go at once",
        ),
        figure(
            "fleet: time to all-ready, fleet / plain Popen",
            plain,
            "x",
            detail="plain Popen lets the first members work while the last are being started;"
            " a fleet starts them together on purpose (the barrier), so this is the price of it",
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
