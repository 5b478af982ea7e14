"""What one attempt of a start-up test leaves for the report.

The fixtures put references into a ``StartupRecord`` in the test item's stash as they are
created (the runtime controller, ``hub_race``, ``server_fleet``, ``startup_case``, the caches);
the report hooks read it when the test's reports are made. ``snapshot`` turns it into plain
JSON values (str, int, float, bool, None, lists, dicts): that is what travels to the
pytest-xdist controller on the report and ends up in the JSON report.

Times in a snapshot are seconds since the record was created (the test's first start-up
fixture), except ``seconds_to_ready`` and ``seconds_to_exit``, which count from their fleet's
release, as ``Server`` does. Every process of a test reads one monotonic clock (one machine).

What a process under test wrote or said (its output tail, a worker's cause, a server's
reason, its argv, the paths it touched) is put in ``printable``: a str without control
characters or lone surrogates, which every JSON reader takes and no terminal acts on.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_startup_guard.report.words import EXPLORATION_OUTCOMES
from pytest_startup_guard.verdicts.kinds import WORDS
from pytest_startup_guard.wording import printable

if TYPE_CHECKING:
    from pytest_startup_guard.cache.hubcache import FakeHubCache
    from pytest_startup_guard.faults.port_base import ArmedPortFault
    from pytest_startup_guard.fleet.fleet import Fleet
    from pytest_startup_guard.fleet.server import Server
    from pytest_startup_guard.fleet.server_fleet import ServerFleet
    from pytest_startup_guard.fleet.workers import Worker
    from pytest_startup_guard.races.armed import ArmedRace
    from pytest_startup_guard.races.exploration import Exploration
    from pytest_startup_guard.races.hubrace import HubRace
    from pytest_startup_guard.runtime.controller import (
        RuntimeController,
    )
    from pytest_startup_guard.runtime.events import (
        AccessEvent,
        ProcessRecord,
    )
    from pytest_startup_guard.verdicts.cases import StartupCase

# A test that uses one of these is a start-up test: it is reported, and gets no reruns.
STARTUP_TEST_FIXTURES = ("hub_race", "server_fleet", "startup_case")

# Lists longer than this are cut in what travels on reports (chaos makes thousands of windows);
# the artifacts keep everything.
MAX_LISTED = 500
OUTPUT_TAIL_LINES = 15


def is_startup_test(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return any(name in names for name in STARTUP_TEST_FIXTURES)


@dataclass
class StartupRecord:
    """References to what one attempt of a test set up (read, never changed, by the report)."""

    origin: float = field(default_factory=time.monotonic)
    controller: RuntimeController | None = None
    races: HubRace | None = None
    fleets: ServerFleet | None = None
    case: StartupCase | None = None
    caches: list[FakeHubCache] = field(default_factory=list)
    artifacts: str | None = None  # the folder written for this attempt's failure, if any

    def add_cache(self, cache: FakeHubCache) -> None:
        if all(known.root != cache.root for known in self.caches):
            self.caches.append(cache)

    def all_caches(self) -> list[FakeHubCache]:
        """The caches the test used: its own, the fleets' default, those of raced repos."""
        found: dict[str, FakeHubCache] = {}
        candidates = list(self.caches)
        if self.fleets is not None and self.fleets.default_cache is not None:
            candidates.append(self.fleets.default_cache)
        for armed in self.armed():
            repo = armed.target.repo
            if repo is not None:
                candidates.append(repo.cache)
        if self.case is not None and self.case.repo is not None:
            candidates.append(self.case.repo.cache)
        for cache in candidates:
            found.setdefault(str(cache.root), cache)
        return list(found.values())

    def armed(self) -> list[ArmedRace]:
        if self.races is None:
            return []
        try:
            self.races.hits  # noqa: B018 - takes in the windows of chaos refreshers
        except OSError:
            pass  # after teardown their logs are gone, and their windows were taken in at close
        with self.races.controller.lock:
            return list(self.races.armed)

    def fleet_list(self) -> list[Fleet]:
        return list(self.fleets.fleets) if self.fleets is not None else []

    def accesses(self) -> list[AccessEvent]:
        if self.controller is None:
            return []
        with self.controller.lock:
            return list(self.controller.accesses)

    def process_history(self) -> list[ProcessRecord]:
        if self.controller is None:
            return []
        with self.controller.lock:
            return list(self.controller.history)

    def since(self, t: float | None) -> float | None:
        return None if t is None else round(t - self.origin, 6)


RECORD_KEY = pytest.StashKey[StartupRecord]()


def record_of(item: pytest.Item) -> StartupRecord:
    """The record of the item's current attempt, created by the first fixture that asks."""
    record = item.stash.get(RECORD_KEY, None)
    if record is None:
        record = item.stash[RECORD_KEY] = StartupRecord()
    return record


def take_record(item: pytest.Item) -> StartupRecord | None:
    """Remove the record at the end of an attempt: a rerun starts a new one."""
    record = item.stash.get(RECORD_KEY, None)
    if record is not None:
        del item.stash[RECORD_KEY]
    return record


# -- the snapshot ------------------------------------------------------------------------------


def _limited(items: list[Any], limit: int | None) -> list[Any]:
    return items if limit is None else items[:limit]


def member_names(record: StartupRecord) -> dict[str, str]:
    """Child-runtime member label (``fleet1:0``) -> ``server 0`` (``fleet 2 server 0`` if many)."""
    fleets = record.fleet_list()
    names = {}
    for number, fleet in enumerate(fleets):
        for server in fleet.servers:
            prefix = f"fleet {number + 1} " if len(fleets) > 1 else ""
            names[server.member] = f"{prefix}server {server.index}"
    return names


def race_facts(record: StartupRecord, armed: ArmedRace, limit: int | None) -> dict[str, Any]:
    names = member_names(record)
    target = armed.target
    lock = record.races.controller.lock if record.races is not None else None
    if lock is not None:
        with lock:
            windows, hits = list(armed.windows), list(armed.hits)
    else:
        windows, hits = list(armed.windows), list(armed.hits)
    per_process: dict[int, dict[str, Any]] = {}
    for hit in hits:
        entry = per_process.setdefault(
            hit.pid,
            {"pid": hit.pid, "member": names.get(hit.member or "", hit.member), "hits": 0},
        )
        entry["hits"] += 1
    return {
        "name": armed.name,
        "repo": target.repo.repo_id if target.repo is not None else None,
        "revision": target.revision,
        "filename": target.filename,
        "path": str(target.path) if hasattr(target, "path") else None,  # generic races
        "target": target.label,
        "trigger": armed.trigger.describe(),
        "allow_miss": armed.allow_miss,
        "windows_total": len(windows),
        "windows": [
            {
                "opened": record.since(window.opened_t),
                "closed": record.since(window.closed_t),
                "opened_by": window.opened_by,
                "member": names.get(window.member or "", window.member),
            }
            for window in _limited(windows, limit)
        ],
        "hits_total": len(hits),
        "hits": [
            {
                "pid": hit.pid,
                "member": names.get(hit.member or "", hit.member),
                "op": hit.op,
                "path": printable(_relative(hit.path, target.folder)),
                "t": record.since(hit.t),
                "window": hit.window,
                "found": printable(hit.found),
            }
            for hit in _limited(hits, limit)
        ],
        "hits_per_process": sorted(per_process.values(), key=lambda entry: entry["pid"]),
    }


def _relative(path: str, folder: os.PathLike[str]) -> str:
    try:
        return os.path.relpath(path, folder)
    except ValueError:
        return path


def server_facts(record: StartupRecord, fleet: Fleet, server: Server) -> dict[str, Any]:
    hits = len(server.hits)
    workers = server.workers  # read once: every fact below judges the same list
    failed = {worker.pid for worker in server.failed_workers(workers)}
    # Ready, no worker failed, and the member did not die after readiness: what a race that
    # hit it can be said to have been absorbed by (never a server whose worker died).
    started_up = server.ready and not failed and server.died_after_ready is None
    facts: dict[str, Any] = {
        "index": server.index,
        "pid": server.pid,
        "pids": sorted(fleet.members_pids(server)),
        "port": server.port,
        "told_port": server.told_port,
        "port_owned": server.port_owned,
        "state": server.state,
        "ready": server.ready,
        "seconds_to_ready": _rounded(server.seconds_to_ready),
        "returncode": server.returncode,
        "seconds_to_exit": _rounded(server.seconds_to_exit),
        "seconds_to_timeout": _rounded(server.seconds_to_timeout),
        "seconds_waiting": _rounded(server.seconds_waiting),
        "reason": printable(server.reason),
        "hits": hits,
        "absorbed": bool(hits and started_up),
        "started_up": started_up,
        "died_after_ready": _rounded(server.died_after_ready),
        "workers": [worker_facts(record, worker, worker.pid in failed) for worker in workers],
    }
    if not started_up:  # a server whose worker died answered its probe: its output says why
        facts["output_tail"] = server.tail(OUTPUT_TAIL_LINES)
    return facts


def worker_facts(record: StartupRecord, worker: Worker, failed: bool) -> dict[str, Any]:
    """A process under a member (``fleet.workers``): when it started and ended (the report's
    seconds), how (``exit_code``: negative for a signal, null where no word reached the plugin)
    and why; ``failed`` as its server judged it (what the fleet's stop ended is not failed)."""
    return {
        "pid": worker.pid,
        "ppid": worker.ppid,
        "role": worker.role,
        "started": record.since(worker.started_t),
        "startup_work": worker.startup_work,
        "ended": record.since(worker.ended_t),
        "exit_code": worker.exit_code,
        "known_from": worker.known_from,
        "cause": printable(worker.cause) if worker.cause is not None else None,
        "failed": failed,
    }


def _stopped(record: StartupRecord, fleet: Fleet) -> float | None:
    """When the fleet's stop began (the report's seconds), or None while it runs."""
    stops = [server.stopped_t for server in fleet.servers if server.stopped_t is not None]
    return record.since(min(stops)) if stops else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def fleet_facts(record: StartupRecord, fleet: Fleet) -> dict[str, Any]:
    return {
        "command": fleet.label,
        "count": len(fleet),
        "timeout": fleet.timeout,
        "released": record.since(fleet.released_t),
        "stopped": _stopped(record, fleet),
        "servers": [server_facts(record, fleet, server) for server in fleet.servers],
        "port_faults": [port_fault_facts(record, armed) for armed in fleet.port_faults.armed],
    }


def port_fault_facts(record: StartupRecord, armed: ArmedPortFault) -> dict[str, Any]:
    """A port fault of a launch: the port, when it was taken and given back, who met it."""
    hold = getattr(armed.fault, "hold", None)
    return {
        "kind": armed.kind,
        "fault": armed.fault.describe(),
        "members": list(armed.members),
        "port": armed.port,
        "hold": hold,
        "allow_miss": armed.allow_miss,
        "met": armed.met,
        "taken": record.since(armed.taken_t),
        "released": record.since(armed.released_t),
        "hits_total": len(armed.hits),
        "hits": [
            {
                "pid": hit.pid,
                "member": f"server {hit.member}",
                "port": hit.port,
                "t": record.since(hit.t),
                "taken_by": hit.taken_by,
            }
            for hit in _limited(armed.hits, MAX_LISTED)
        ],
        "binds_total": len(armed.binds),
    }


def time_to_ready(fleets: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Median and worst seconds to ready over every server of the test, or None (no fleet)."""
    import statistics

    servers = [server for fleet in fleets for server in fleet["servers"]]
    if not servers:
        return None
    seconds = [s["seconds_to_ready"] for s in servers if s["seconds_to_ready"] is not None]
    return {
        "servers": len(servers),
        "ready": len(seconds),
        "median": round(statistics.median(seconds), 6) if seconds else None,
        "worst": round(max(seconds), 6) if seconds else None,
    }


def verdict_facts(case: StartupCase | None) -> dict[str, Any] | None:
    if case is None:
        return None
    judgement = case.judgement
    return {
        "case": case.spec.id,
        "kind": case.kind,
        "name": case.name,
        "target": case.target,
        "checked": judgement is not None,
        "passed": None if judgement is None else judgement.passed,
        "undecided": judgement is not None and judgement.undecided,
        "expected": WORDS[case.kind].expected,
        "message": "" if judgement is None else judgement.message,
    }


def process_facts(record: StartupRecord) -> list[dict[str, Any]]:
    names = member_names(record)
    return [
        {
            "pid": process.pid,
            "ppid": process.ppid,
            "member": names.get(process.member or "", process.member),
            "argv": [printable(str(arg)) for arg in process.argv[:8]],
            "hello": record.since(process.hello_t),
            "gone": record.since(process.gone_t),
        }
        for process in record.process_history()
    ]


def access_facts(record: StartupRecord, accesses: list[AccessEvent]) -> list[dict[str, Any]]:
    """Each access of a watched folder (the cache): who, which operation, when. The timelines
    draw them; a race's ``hits`` say which of them met its window, and which file."""
    names = member_names(record)
    return [
        {
            "pid": access.pid,
            "member": names.get(access.member or "", access.member),
            "op": access.op,
            "t": record.since(access.t),
        }
        for access in accesses
    ]


def exploration_facts(exploration: Exploration) -> dict[str, Any]:
    """An exploration and how many of its points ended in each outcome."""
    return {
        "race": exploration.race,
        "target": exploration.target,
        "mode": exploration.mode,
        "points": len(exploration.points),
        "found": exploration.found,
        "launches": exploration.launches,
        "explored": len(exploration.explored),
        "startups": exploration.startups,
        **{field: len(exploration.of(outcome)) for field, outcome in EXPLORATION_OUTCOMES},
    }


def snapshot(record: StartupRecord, *, limit: int | None = MAX_LISTED) -> dict[str, Any]:
    """Plain JSON values describing the attempt so far (see the README's report schema)."""
    fleets = [fleet_facts(record, fleet) for fleet in record.fleet_list()]
    races = [race_facts(record, armed, limit) for armed in record.armed()]
    servers = [server for fleet in fleets for server in fleet["servers"]]
    accesses = record.accesses()
    explorations: list[Exploration] = []
    if record.races is not None:
        explorations += record.races.explorations
    if record.fleets is not None:  # server_fleet.explore, after hub_race.explore's
        explorations += record.fleets.explorations
    return {
        "races": races,
        "explorations": [exploration_facts(exploration) for exploration in explorations],
        "corruptions": [
            {
                "kind": corruption.kind,
                "repo": corruption.repo_id,
                "revision": corruption.revision,
                "filename": corruption.filename,
                "path": _relative(str(corruption.path), cache.hub_dir),
            }
            for cache in record.all_caches()
            for corruption in cache.corruptions
        ],
        "fleets": fleets,
        "time_to_ready": time_to_ready(fleets),
        "absorbed": {
            "servers": sum(1 for server in servers if server["absorbed"]),
            "hits": sum(server["hits"] for server in servers if server["absorbed"]),
        },
        "processes": _limited(process_facts(record), limit),
        "accesses_total": len(accesses),
        "accesses": access_facts(record, _limited(accesses, limit)),
        "verdict": verdict_facts(record.case),
    }
