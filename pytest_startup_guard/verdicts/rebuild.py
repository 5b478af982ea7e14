"""The rebuild verdict: a corrupt cache entry must be discarded and rebuilt, not loaded or refused.

A model's config is a source: a broken one must fail the start-up, naming it. A compile or
kernel cache entry is not: it can be made again, so the right start-up discards a broken entry,
rebuilds it and comes up; one that crashes on it, or refuses to start, keeps failing on every
restart (vllm-project/vllm#35061: a 0-byte compile-cache file), and one that comes up around it
but leaves it in place loads it again at the next start. So a rebuild case passes when

- every member became ready (its probe passed, its workers too, ``expect`` accepts it), and
- afterwards the entry is whole: a file is there, it is not the bytes the corruption wrote, and
  it is not empty (or the user's ``whole(bytes)`` accepts it), and
- every member read the entry (an access of it, or a listing of its folder, by the member or a
  process under it since the corruption was written): else the case proves nothing for it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_startup_guard.cache.file_corruptions import CorruptedFile, corrupt_file
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.outcomes import Problem, failed
from pytest_startup_guard.races.base import PathTarget
from pytest_startup_guard.races.hubrace import HubRace
from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    FILE_OPS,
    TEST_PROCESS,
)
from pytest_startup_guard.verdicts.members import (
    accepts,
    exited_late,
    late_exit,
    resolved_path,
    supervisor_gave_up,
    undecided,
)

# What a start-up must do with a bad cache entry, said once in every member's failure.
MUST = "a cache entry must be discarded and rebuilt, not loaded or refused"
# Listings of the entry's folder: how a cache finds its entries (Triton lists a kernel's folder).
LISTINGS = ("os.listdir", "os.scandir")


@dataclass(frozen=True)
class CorruptEntry:
    """A cache entry a rebuild case corrupted: the file, its bytes before and after, when."""

    file: CorruptedFile
    label: str  # "compile/matmul.artifact under shared_dir", for messages
    applied_t: float  # time.monotonic() once the corruption was written

    @property
    def path(self) -> Path:
        return self.file.path


def corrupt_entry(
    name: str, path: str | os.PathLike[str], races: HubRace, seed: int, where: str
) -> CorruptEntry:
    """Write corruption ``name`` onto the plain file at ``path``, which must lie under a folder
    the plugin owns for this test, and have every process report its accesses of the entry's
    folder from now on (to tell who read it)."""
    root_name, root, resolved = races.roots.check(path, where)
    corrupted = corrupt_file(resolved, name, seed, where)
    races.controller.watch(resolved.parent)
    label = PathTarget(path=resolved, root=root, root_name=root_name).label
    return CorruptEntry(corrupted, label, time.monotonic())


def rebuild_problems(
    entry: CorruptEntry,
    fleet: Fleet,
    controller: RuntimeController,
    workers: dict[int, list[str]],
    expect: Callable[[Server], object] | None,
    whole: Callable[[bytes], object] | None,
) -> list[Problem]:
    """Every reason the fleet did not discard and rebuild ``entry`` (empty: it did)."""
    readers = _readers(entry, fleet, controller)
    problems: list[Problem] = []
    for server in fleet.servers:
        if server.state == "undecided":
            problems.append(undecided(server))
            continue
        if server.index not in readers:
            problems.append(
                Problem(
                    f"server {server.index} never read the cache entry {entry.path} (nor listed its"
                    " folder): this case proves nothing for it (does it load this entry? is its"
                    " interpreter under the plugin?)"
                )
            )
        problems.extend(failed(_member_problems(server, entry, fleet, workers, expect)))
    if all(server.ready and server.state == "ready" for server in fleet.servers):
        problems.extend(failed(_entry_problems(entry, whole)))
    return problems


def _member_problems(
    server: Server,
    entry: CorruptEntry,
    fleet: Fleet,
    workers: dict[int, list[str]],
    expect: Callable[[Server], object] | None,
) -> list[str]:
    """Why one member did not come up on the corrupt entry (empty: it did)."""
    index, what = server.index, f"the corrupt cache entry {entry.label} ({entry.file.corruption})"
    if server.ready and server.state == "ready":
        if workers.get(index):
            return workers[index]  # up, but a process of it died on the way
        if expect is not None and not accepts(expect, server):
            return [f"server {index} is up but check(expect=...) rejected what it serves"]
        return []
    if server.state == "rejected":
        return [f"server {index} came up WRONG on {what} ({server.reason}): {MUST}"]
    if server.state == "hung":
        return [
            f"server {index} hung on {what} ({server.reason}): {MUST}, within the readiness"
            " time-out; waiting forever is failing"
        ]
    if server.state != "exited":
        return [f"server {index} did not start up on {what}: {server.status()}; {MUST}"]
    if exited_late(server, fleet):
        return [late_exit(server, fleet)]
    failed = server.returncode != 0 or supervisor_gave_up(server)
    if failed and server.output_mentions(entry.path.name):
        return [
            f"server {index} failed closed on {what}: {server.status()}; naming the file is"
            f" right for a source such as a model's config, wrong for a cache: {MUST}"
        ]
    return [f"server {index} crashed on {what}: {server.status()}; {MUST}"]


def _entry_problems(entry: CorruptEntry, whole: Callable[[bytes], object] | None) -> list[str]:
    """Every member came up: the entry must now be whole, or the next restart meets it again."""
    up = "every member became ready, but"
    try:
        data = entry.path.read_bytes()
    except FileNotFoundError:
        return [
            f"{up} the cache entry {entry.path} is gone: it was discarded and never rebuilt, so"
            " every restart builds it again; write the rebuilt entry back (to a temporary name"
            " in its folder, then os.replace)"
        ]
    except OSError as error:
        return [f"{up} the cache entry {entry.path} cannot be read after the start-up: {error}"]
    if data == entry.file.corrupt:
        return [
            f"{up} the corrupt cache entry {entry.path} is still in place ({len(data)} bytes, as"
            f" the {entry.file.corruption} corruption wrote them): it would be loaded again on"
            " every restart; a start-up must discard a bad cache entry and write a new one"
        ]
    if whole is None:
        if not data:
            return [f"{up} the cache entry {entry.path} was rewritten empty (0 bytes): not whole"]
        return []
    try:
        accepted = bool(whole(data))
    except Exception as error:
        return [
            f"{up} check(whole=...) raised {type(error).__name__}: {error} on the cache entry"
            f" {entry.path} ({len(data)} bytes): count that as not whole"
        ]
    if not accepted:
        return [
            f"{up} check(whole=...) rejected the cache entry {entry.path} after the start-up"
            f" ({len(data)} bytes): it was rewritten, but not whole"
        ]
    return []


def _readers(entry: CorruptEntry, fleet: Fleet, controller: RuntimeController) -> set[int]:
    """The members whose processes accessed the entry, or listed its folder, since it was
    corrupted (the test process's own accesses aside: a case judges the fleet)."""
    path, folder = str(entry.path), str(entry.path.parent)
    with controller.lock:
        accesses = list(controller.accesses)
    real: dict[str, str] = {}  # each reported path once: the child reports it unresolved
    pids = set()
    for access in accesses:
        if access.t < entry.applied_t or access.op not in FILE_OPS:
            continue
        if access.member == TEST_PROCESS or access.pid == os.getpid():
            continue
        if access.path not in real:
            real[access.path] = resolved_path(access.path)
        seen = real[access.path]
        if seen == path or (seen == folder and access.op in LISTINGS):
            pids.add(access.pid)
    return {server.index for server in fleet.servers if fleet.members_pids(server) & pids}


__all__ = ["MUST", "CorruptEntry", "corrupt_entry", "rebuild_problems"]
