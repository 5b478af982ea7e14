"""Faults beyond the hub cache: each generic race, stale lock and port fault, caught and never a
false alarm.

The servers are the examples' (``examples/faults.py``): ``cache_server.py`` loads a compiled
kernel from a shared compile cache, ``lock_server.py`` builds an extension under a build lock,
``port_server.py`` binds the port it is told.
For each fault, in one run of this script:

- caught: a fleet of 4 servers that do not handle it (no retry; a ``FileBaton``-style wait; a
  server that dies on a busy port, ``port_taken`` on member 1 or ``same_port`` of members 0, 1)
  under the fault's default deterministic trigger, interleaved with a clean start-up of the same
  fleet. Target: 100% of runs caught. For a generic race, the first failure before the clean
  start-up would have ended (<= 1.0x, the median of the interleaved pairs' ratios, with their
  spread); for a port fault within 1.3x (member 1 can only fail once member 0 listens). A server that waits forever on a
  stale lock can only be caught at the readiness time-out: its figure is the time to the verdict
  over that time-out.
- the faults of the public incidents (``faults_incidents.py``: ``port_stolen``, ``fs_error``,
  ``network_fs``, ``interleave``, ``listen_late``, ``lock_not_exclusive``, rebuild cases), each
  caught in 10 of 10 runs of servers that do not handle it, first failure <= 1.0x a clean
  start-up, and 40 raced start-ups each of servers that do (over 400 in all) judged without a
  false alarm;
- false alarms: start-ups of a fleet of 2 servers that handle it (a bounded retry; breaking the
  stale lock, failing closed, filelock's ``SoftFileLock``; retrying the bind, moving to another
  port), each judged by the plugin's own verdict (``StartupCase.check``; for a port fault: every
  server ready, on a port of its own, and the fault met). Target: 0 wrong verdicts.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import Figure, emit, figure, parse_args
from workbench import EXAMPLES, Bench, first_failure, workbench

from pytest_startup_guard import port_taken, ready, same_port
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.server_fleet import ServerFleet
from pytest_startup_guard.verdicts.cases import CaseSpec, StartupCase

sys.path.insert(0, str(EXAMPLES))
from faults import KERNEL, kernel_server, lock_server, port_server
from faults_incidents import RECIPES, FaultNotMet, Recipe
from faults_incidents import launch as incident_launch

GENERIC = ("file_replace", "file_rewrite", "partial_write", "folder_move")
STALE = ("stale_lock", "stale_soft_lock")
PORTS = ("port_taken", "same_port")
HANDLERS = {
    **{race: ("retry",) for race in GENERIC},
    "stale_lock": ("break", "fail"),
    "stale_soft_lock": ("soft",),
    "port_taken": ("retry",),
    "same_port": ("other_port",),
}
UNHANDLED = {**{fault: "naive" for fault in GENERIC}, **dict.fromkeys(STALE, "wait")}
UNHANDLED.update(dict.fromkeys(PORTS, "die"))
LOCK_TIMEOUT = 2.0  # readiness time-out of the stale-lock fleets: a hang is caught by then


def prepare(shared: Path, fault: str) -> tuple[Path, Path]:
    """(what the fault is applied to, the folder the servers are pointed at)."""
    if fault in PORTS:
        return shared, shared
    if fault in STALE:
        return shared / "build" / "lock", shared / "build"
    entry = shared / "kernels" / "matmul.json"
    entry.parent.mkdir()
    entry.write_text(json.dumps(KERNEL))
    return entry, shared


def command(fault: str, folder: Path, policy: str) -> list[str]:
    if fault in PORTS:
        return port_server(policy)
    return lock_server(folder, policy) if fault in STALE else kernel_server(folder, policy)


def launch(
    fleets: ServerFleet, fault: str | None, folder: Path, policy: str, count: int, kind: str
) -> Fleet:
    """A fleet of ``count`` servers of ``kind``'s example; with ``fault`` a port fault on it."""
    faults = []
    if fault == "port_taken":
        faults = [port_taken(member=1, hold=0.5)]
    elif fault == "same_port":
        faults = [same_port((0, 1))]
    timeout = LOCK_TIMEOUT if kind in STALE else 60.0
    return fleets.launch(
        command(kind, folder, policy),
        count=count,
        ready=ready.http("/health"),
        timeout=timeout,
        faults=faults,
    )


def caught_run(bench: Bench, fault: str, run: int, count: int) -> float | None:
    """One start-up of servers that do not handle ``fault``; seconds to the first failure."""
    with bench.shared_test(seed=run) as (shared, races, fleets):
        target, folder = prepare(shared, fault)
        if fault not in PORTS:
            races.arm_path(fault, target)
        started = time.monotonic()
        port_fault = fault if fault in PORTS else None
        fleet = launch(fleets, port_fault, folder, UNHANDLED[fault], count, fault)
        return first_failure(fleet, started, hung=True)


def clean_run(bench: Bench, fault: str, count: int) -> float:
    """The same fleet with no fault: seconds until every server is ready."""
    with bench.shared_test() as (shared, _races, fleets):
        _target, folder = prepare(shared, fault)
        started = time.monotonic()
        launch(fleets, None, folder, UNHANDLED[fault], count, fault).assert_all_ready()
        return time.monotonic() - started


def judged_run(bench: Bench, fault: str, policy: str, run: int) -> str | None:
    """One start-up of servers that handle ``fault``, judged as startup_case judges; None when
    the verdict held, else its first problem."""
    kind = "stale" if fault in STALE else "transient"
    with bench.shared_test(seed=run) as (shared, races, fleets):
        target, folder = prepare(shared, fault)
        if fault in PORTS:
            fleet = launch(fleets, fault, folder, policy, 2, fault)
            if not fleet.faults[0].met:
                return f"{fleet.faults[0].describe()} was never met"
            try:
                fleet.assert_all_ready()
            except AssertionError as error:
                return str(error).splitlines()[0]
            owned = [server.port_owned for server in fleet.servers if server.port_owned is not None]
            return None if all(owned) else "a server was probed on a port it does not own"
        case = StartupCase(CaseSpec(kind, fault), races, run, "bench_faults")
        case.apply(target)
        try:
            case.check(launch(fleets, None, folder, policy, 2, fault))
        except AssertionError as error:
            lines = [line.strip() for line in str(error).splitlines()]
            return next((line[2:] for line in lines if line.startswith("- ")), lines[0])
        return None


def incident_caught(bench: Bench, recipe: Recipe, pairs: int) -> list[Figure]:
    """Interleaved pairs of a clean start-up and one under ``recipe``'s fault of servers that
    do not handle it: the share caught and the first failure against the clean start-up."""
    firsts: list[float | None] = []
    cleans: list[float] = []
    failed_cleans = 0
    for run in range(pairs):
        with bench.shared_test(seed=run) as (shared, races, fleets):
            start = recipe.setup(shared, recipe.clean_policy or recipe.unhandled, False)
            began = time.monotonic()
            clean = fleets.launch(start.argv, count=start.count, ready=ready.http("/health"),
                                  timeout=60.0)  # fmt: skip
            if not all(server.ready for server in clean.servers):
                failed_cleans += 1  # a recipe whose clean start-up fails: said in a figure,
                continue  # and the pair is left out
            cleans.append(time.monotonic() - began)
        with bench.shared_test(seed=run) as (shared, races, fleets):
            start = recipe.setup(shared, recipe.unhandled, True)
            began = time.monotonic()
            try:
                fleet, problem = incident_launch(fleets, start, races, run)
            except FaultNotMet:
                firsts.append(None)  # not caught: the fault never met the servers
                continue
            firsts.append(first_failure(fleet, began) if problem else None)
    caught = [first for first in firsts if first is not None]
    share = len(caught) / len(firsts) if firsts else 0.0
    figures = [
        figure(
            f"faults: {recipe.name}: runs that catch it",
            100 * share,
            "%",
            target="100%",
            passed=share == 1.0,
            detail=f"{len(caught)}/{len(firsts)} start-ups of servers that do not handle it"
            f" ({recipe.unhandled})",
        )
    ]
    if failed_cleans:
        figures.append(
            figure(
                f"faults: {recipe.name}: clean start-ups that failed",
                failed_cleans,
                "runs",
                target="0",
                passed=False,
                detail="the pair is left out of the ratio",
            )
        )
    ratios = [f / c for f, c in zip(firsts, cleans, strict=True) if f is not None]
    if ratios:
        ratio = statistics.median(ratios)
        figures.append(
            figure(
                f"faults: {recipe.name}: first failure / clean start-up",
                ratio,
                "x",
                target="<= 1",
                passed=ratio <= 1.0,
                detail=f"median of {len(ratios)} interleaved pairs' ratios, spread"
                f" {spread(ratios)}; first failure {1000 * statistics.median(caught):.0f} ms,"
                f" clean {1000 * statistics.median(cleans):.0f} ms",
            )
        )
    return figures


def incident_judged(bench: Bench, recipe: Recipe, policy: str, run: int) -> str | None:
    """One raced start-up of servers that handle ``recipe``'s fault: its first problem, or
    None when the verdict held."""
    with bench.shared_test(seed=run) as (shared, races, fleets):
        try:
            _fleet, problem = incident_launch(
                fleets, recipe.setup(shared, policy, True), races, run
            )
        except FaultNotMet as error:
            return str(error)
        return problem


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} to {max(values):.2f}" if values else "-"


def main() -> None:
    args = parse_args(__doc__ or "")
    pairs = 1 if args.quick else 10
    count = 2 if args.quick else 4
    alarms_per_fault = 2 if args.quick else 100
    incident_alarms = 1 if args.quick else 40  # x 11 recipes: over 400 raced start-ups
    figures: list[Figure] = []
    with workbench() as bench:
        for fault in (*GENERIC, *STALE, *PORTS):
            firsts: list[float | None] = []
            cleans: list[float] = []
            for run in range(pairs):  # interleaved: a clean start-up, then a raced one
                cleans.append(clean_run(bench, fault, count))
                firsts.append(caught_run(bench, fault, run, count))
            caught = [first for first in firsts if first is not None]
            share = len(caught) / len(firsts)
            figures.append(
                figure(
                    f"faults: {fault}: runs that catch it",
                    100 * share,
                    "%",
                    target="100%",
                    passed=share == 1.0,
                    detail=f"{len(caught)}/{len(firsts)} start-ups of {count} servers that do not"
                    " handle it",
                )
            )
            if not caught:
                continue
            if fault in STALE:
                ratio = statistics.median(caught) / LOCK_TIMEOUT
                figures.append(
                    figure(
                        f"faults: {fault}: verdict / readiness time-out",
                        ratio,
                        "x",
                        target="<= 1.3",
                        passed=ratio <= 1.3,
                        detail=f"a server that waits forever is caught at the {LOCK_TIMEOUT:g} s"
                        f" time-out; verdict after {spread(caught)} s",
                    )
                )
            else:
                ratios = [f / c for f, c in zip(firsts, cleans, strict=True) if f is not None]
                ratio = statistics.median(ratios)
                limit = 1.3 if fault in PORTS else 1.0
                figures.append(
                    figure(
                        f"faults: {fault}: first failure / clean start-up",
                        ratio,
                        "x",
                        target=f"<= {limit:g}",
                        passed=ratio <= limit,
                        detail=f"median of {len(ratios)} interleaved pairs' ratios, spread"
                        f" {spread(ratios)}; first failure"
                        f" {1000 * statistics.median(caught):.0f} ms, clean"
                        f" {1000 * statistics.median(cleans):.0f} ms",
                    )
                )
        for recipe in RECIPES:
            figures.extend(incident_caught(bench, recipe, pairs))
        plan = [
            (fault, policy, run)
            for run in range(alarms_per_fault)
            for fault in (*GENERIC, *STALE, *PORTS)
            for policy in HANDLERS[fault][run % len(HANDLERS[fault]) :][:1]
        ]
        incident_plan = [
            (recipe, recipe.handled[run % len(recipe.handled)], run)
            for run in range(incident_alarms)
            for recipe in RECIPES
        ]
        with ThreadPoolExecutor(max_workers=6) as pool:
            verdicts = list(pool.map(lambda item: judged_run(bench, *item), plan))
            incident_verdicts = list(
                pool.map(lambda item: incident_judged(bench, *item), incident_plan)
            )
    wrong = [(item, problem) for item, problem in zip(plan, verdicts, strict=True) if problem]
    incident_wrong = [
        (f"{recipe.name}/{policy}/{run}", problem)
        for (recipe, policy, run), problem in zip(incident_plan, incident_verdicts, strict=True)
        if problem
    ]
    figures.append(
        figure(
            f"faults: false alarms in {len(incident_plan)} start-ups of servers that handle the"
            " incidents' faults",
            len(incident_wrong),
            "runs",
            target="0",
            passed=not incident_wrong,
            detail=f"{incident_alarms} per fault ({len(RECIPES)} faults: port_stolen,"
            " fs_error, network_fs, interleave, listen_late, lock_not_exclusive, rebuild)"
            + (
                f"; first: {incident_wrong[0][0]}: {incident_wrong[0][1][:160]}"
                if incident_wrong
                else ""
            ),
        )
    )
    figures.append(
        figure(
            f"faults: false alarms in {len(plan)} raced start-ups of servers that handle them",
            len(wrong),
            "runs",
            target="0",
            passed=not wrong,
            detail=f"{alarms_per_fault} per fault, fleets of 2"
            + (f"; first: {wrong[0][0]}: {wrong[0][1][:160]}" if wrong else ""),
        )
    )
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
