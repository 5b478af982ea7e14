"""What the cases that must fail closed find wrong: a corrupt file, a stale lock.

A **corrupt** case (a persistent corruption of a hub repo's file) passes when every member
exits non-zero within the readiness time-out, its output naming the file or the repo; a
**stale** case (a lock a dead process left, or one held for good) when every member recovers
(breaks the lock, or goes on without it) or fails the same way, naming the lock. Each problem
carries its outcome (``outcomes.Problem``): a member the machine never gave its time is
undecided, not failed.
"""

from __future__ import annotations

from pathlib import Path

from pytest_startup_guard.cache.hubcache import CachedRepo
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.outcomes import Problem, failed
from pytest_startup_guard.races.armed import ArmedRace
from pytest_startup_guard.verdicts.members import exited_late, late_exit, undecided


def corrupt_problems(
    fleet: Fleet, repo: CachedRepo, filename: str, corruption: str
) -> list[Problem]:
    """Fail closed on a corrupt file: exit non-zero, in time, naming the file or the repo."""
    names = {repo.repo_id, filename, repo.folder_name}
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
                    f"server {server.index} hung: still running on a corrupt config ({server.reason});"
                    " hanging is failing, it must exit with an error"
                )
            )
        elif server.returncode == 0:
            problems.append(
                Problem(f"server {server.index} exited with code 0 on a corrupt config")
            )
        elif exited_late(server, fleet):
            problems.append(Problem(late_exit(server, fleet)))
        elif not any(server.output_mentions(name) for name in names):
            problems.append(
                Problem(
                    f"server {server.index} failed, but its output names neither {filename!r} nor"
                    f" {repo.repo_id!r}: whoever reads the log cannot tell what broke"
                )
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
        elif server.returncode == 0:
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
