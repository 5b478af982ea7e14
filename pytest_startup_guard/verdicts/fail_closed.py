"""What the cases that must fail closed find wrong: a corrupt file, a stale lock.

A **corrupt** case (a persistent corruption of a hub repo's file) passes when every member
exits non-zero within the readiness time-out, its output naming the file or the repo. Under a
supervisor (a member whose workers read the corrupt file and that did not read it itself:
``uvicorn --workers``, ``gunicorn -w``, a vLLM-style launcher) the workers are judged instead of
the supervisor's exit code: each worker that read the file must have failed closed (exited
non-zero, or been ended by its supervisor after a sibling failed) within the readiness
time-out, and the member must be gone (hanging is failing). A
**stale** case (a lock a dead process left, or one held for good) when every member recovers
(breaks the lock, or goes on without it) or fails the same way, naming the lock. Each problem
carries its outcome (``outcomes.Problem``): a member the machine never gave its time is
undecided, not failed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pytest_startup_guard.cache.hubcache import CachedRepo
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.fleet.workers import Worker
from pytest_startup_guard.outcomes import Problem, failed
from pytest_startup_guard.races.armed import ArmedRace
from pytest_startup_guard.runtime.events import FILE_OPS, LOOK_OPS
from pytest_startup_guard.verdicts.members import (
    exited_late,
    late_exit,
    resolved_path,
    supervisor_gave_up,
    undecided,
)


def corrupt_problems(
    fleet: Fleet,
    repo: CachedRepo,
    filename: str,
    corruption: str,
    changed: Iterable[Path] = (),
) -> list[Problem]:
    """Fail closed on a corrupt file: exit non-zero, in time, naming the file or the repo;
    under a supervisor, every worker that read the file (its pointer or blob, or ``changed``:
    the paths the corruption wrote) does (``_workers_fail_closed``)."""
    names = {repo.repo_id, filename, repo.folder_name}
    paths = {resolved_path(str(path)) for path in (repo.pointer(filename), *changed)}
    paths.add(str(repo.blob(filename)))
    readers = _readers(fleet, paths)
    problems: list[Problem] = []
    for server in fleet.servers:
        if server.state == "undecided":
            problems.append(undecided(server))
        elif server.ready or server.state == "rejected":
            problems.append(
                Problem(
                    f"server {server.index} came up on a corrupt {filename} ({corruption}): it hid"
                    " the corruption"
                )
            )
        elif server.state == "hung":
            problems.append(
                Problem(
                    f"server {server.index} hung: still running on a corrupt {filename}"
                    f" ({server.reason}); hanging is failing, it must exit with an error"
                )
            )
        elif (supervised := _supervised(fleet, server, readers)) is not None:
            problems.extend(failed(_workers_fail_closed(fleet, server, supervised, filename)))
            if not any(server.output_mentions(name) for name in names):
                problems.append(Problem(_unnamed(server, filename, repo.repo_id)))
        elif server.returncode == 0:
            problems.append(
                Problem(f"server {server.index} exited with code 0 on a corrupt {filename}")
            )
        elif exited_late(server, fleet):
            problems.append(Problem(late_exit(server, fleet)))
        elif not any(server.output_mentions(name) for name in names):
            problems.append(Problem(_unnamed(server, filename, repo.repo_id)))
    return problems


def _unnamed(server: Server, filename: str, repo_id: str) -> str:
    return (
        f"server {server.index} failed, but its output names neither {filename!r} nor"
        f" {repo_id!r}: whoever reads the log cannot tell what broke"
    )


def _readers(fleet: Fleet, paths: set[str]) -> set[int]:
    """The pids of the fleet's processes that accessed one of ``paths`` (resolved but the last
    part, as ``resolved_path`` gives them), or looked at one: huggingface_hub decides with
    ``isfile`` that a pointer whose blob is missing is not there, and reads nothing."""
    with fleet.controller.lock:
        accesses = [*fleet.controller.accesses, *fleet.controller.looks]
    real: dict[str, str] = {}  # each reported path resolved once
    pids = set()
    for access in accesses:
        if access.op not in FILE_OPS and access.op not in LOOK_OPS:
            continue
        if access.path not in real:
            real[access.path] = resolved_path(access.path)
        if real[access.path] in paths:
            pids.add(access.pid)
    return pids


def _supervised(fleet: Fleet, server: Server, readers: set[int]) -> list[Worker] | None:
    """The workers of ``server`` that read the corrupt file, where the member is a supervisor
    (it did not read the file itself, and a worker did); None: judge the member itself."""
    if server.pid in readers:
        return None
    fleet.catch_up(server)
    workers = [worker for worker in server.workers if worker.pid in readers]
    return workers or None


def _workers_fail_closed(
    fleet: Fleet, server: Server, workers: list[Worker], filename: str
) -> list[str]:
    """Each worker that read the corrupt file failed closed: it exited non-zero (or a signal
    ended it), or exited 0 only after a sibling had failed (its supervisor stopped it), within
    the readiness time-out in its member's own time; one still running hangs on it."""
    failures = [w.ended_t for w in workers if w.ended_t is not None and w.exit_code != 0]
    first_failure = min(failures, default=None)
    problems = []
    for worker in workers:
        who = f"{worker.label()} of server {server.index}"
        if worker.ended_t is None:
            problems.append(
                f"{who} is still running on a corrupt {filename} after its server exited:"
                " hanging is failing, it must exit with an error"
            )
        elif worker.exit_code == 0 and (first_failure is None or worker.ended_t < first_failure):
            problems.append(f"{who} exited with code 0 on a corrupt {filename}")
        elif server.seconds_since_release(worker.ended_t) - server.seconds_waiting >= fleet.timeout:
            problems.append(
                f"{who} failed only after the readiness time-out: it {worker.end_words()} after"
                f" {server.seconds_since_release(worker.ended_t):.2f} s, {fleet.timeout:g} s"
                " allowed"
            )
    return problems


def stale_problems(fleet: Fleet, workers: dict[int, list[str]], armed: ArmedRace) -> list[Problem]:
    """Recover or fail closed, naming the lock, within the readiness time-out."""
    lock = Path(getattr(armed.target, "path", ""))
    problems: list[Problem] = []
    for server in fleet.servers:
        if server.state == "undecided":
            problems.append(undecided(server))
            continue
        if not server.hits:
            problems.append(
                Problem(
                    f"server {server.index} never touched the stale lock {lock}: this case proves"
                    " nothing for it (does it take this lock? is its interpreter under the plugin?)"
                )
            )
        if server.ready and workers.get(server.index):
            problems.extend(failed(workers[server.index]))  # up, but a process of it died
            continue
        if server.ready or server.state == "rejected":
            continue  # it recovered: broke the lock, or went on without it
        if server.state == "hung":
            # A lock held for good has a live holder (a wedged process, a lock never granted
            # on a network mount): it cannot be broken, only waited for in bounded time.
            held = getattr(armed.race, "name", "") == "lock_held_for_good"
            what = (
                "a start-up must give up on a lock nobody releases, failing closed naming it,"
                if held
                else "a start-up must break a lock a dead process left, or fail closed naming it,"
            )
            problems.append(
                Problem(
                    f"server {server.index} hung on the {'held' if held else 'stale'} lock {lock}"
                    f" ({server.reason}): {what} within the readiness time-out; waiting forever is"
                    " failing"
                )
            )
        elif server.returncode == 0 and not supervisor_gave_up(server):
            problems.append(
                Problem(
                    f"server {server.index} exited with code 0 before it was ready: a failed"
                    f" start-up on the stale lock {lock} must exit non-zero"
                )
            )
        elif exited_late(server, fleet):
            problems.append(Problem(late_exit(server, fleet)))
        elif not server.output_mentions(lock.name):
            problems.append(
                Problem(
                    f"server {server.index} failed, but its output does not name the lock"
                    f" {lock.name!r}: whoever reads the log cannot tell which lock to remove"
                )
            )
    return problems


__all__ = ["corrupt_problems", "stale_problems"]
