"""``--startup-guard-artifacts DIR``: what CI keeps of a failed start-up test.

For each failed attempt of a start-up test, a folder ``DIR/<node id, made a file name>``
(``...-rerun-N`` for the N-th rerun) with::

    failure.txt                 node id, attempt, phase, replay command, the failure message
    timeline.txt                the text timeline at the failure
    races.json                  every armed race: windows and hits, nothing cut
    cache-listing.json          each cache of the test as it was at the failure (paths,
                                kinds, link targets, sizes), before teardown repaired it
    processes.json              every process under the plan (pid, parent, member, argv)
    test.json                   the test's part of the JSON report, nothing cut
    fleet-<n>/server-<i>.log    each server's output (copied again at teardown: complete)
    stacks-<pid>.txt            the Python stacks collected from hung processes

Nothing is written for an attempt that passes. Each file is written whole or not at all, never
through a name planted in the folder (``atomic``).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_startup_guard.report import strict_json
from pytest_startup_guard.report.atomic import copy_atomically, write_atomically

if TYPE_CHECKING:
    from pytest_startup_guard.report.record import StartupRecord

MAX_NAME = 120


def folder_name(nodeid: str, attempt: int) -> str:
    """A file name for a node id: ``tests/test_a.py::test_x[p]`` -> ``tests_test_a.py__test_x_p``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid.replace("::", "__")).strip("_.") or "test"
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(nodeid.encode()).hexdigest()[:8]  # a name, not a secret
        name = f"{name[:MAX_NAME]}-{digest}"
    return name if attempt == 0 else f"{name}-rerun-{attempt}"


def _write_json(path: Path, value: Any) -> None:
    write_atomically(path, strict_json.dumps(value, default=str))


def write_failure(
    root: Path,
    nodeid: str,
    attempt: int,
    phase: str,
    record: StartupRecord,
    *,
    failure: str,
    replay: str,
    timeline: str | None,
    facts: dict[str, Any],
) -> Path:
    """Write the folder of a failed attempt, as things are now (at the failure): ``facts`` is
    the attempt's ``snapshot``, nothing cut."""
    folder = root / folder_name(nodeid, attempt)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(
        folder / "failure.txt",
        f"{nodeid}\nattempt {attempt + 1}, failed in {phase}\nreplay: {replay}\n\n{failure}\n",
    )
    if timeline is not None:
        write_atomically(folder / "timeline.txt", timeline + "\n")
    _write_json(folder / "races.json", facts["races"])
    _write_json(
        folder / "cache-listing.json",
        {str(cache.hub_dir): _listing(cache) for cache in record.all_caches()},
    )
    _write_json(folder / "processes.json", facts["processes"])
    _write_json(folder / "test.json", facts)
    copy_outputs(folder, record)
    return folder


def _listing(cache: Any) -> list[dict[str, Any]] | str:
    try:
        listing: list[dict[str, Any]] = cache.listing()
    except OSError as error:  # a half-removed cache still gets a folder
        return f"could not list: {error}"
    return listing


def copy_outputs(folder: Path, record: StartupRecord) -> None:
    """Every server's output and the stacks collected (again at teardown: then complete)."""
    for number, fleet in enumerate(record.fleet_list()):
        for server in fleet.servers:
            target = folder / f"fleet-{number}" / f"server-{server.index}.log"
            target.parent.mkdir(exist_ok=True)
            try:
                copy_atomically(server.output_path, target)
            except OSError as error:
                write_atomically(target, f"(no output: {error})\n")
            for pid, stack in server.stacks.items():
                write_atomically(folder / f"stacks-{pid}.txt", stack)


def finish(folder: Path, record: StartupRecord) -> None:
    """At the attempt's teardown: complete outputs and the final facts (windows closed)."""
    from pytest_startup_guard.report.record import snapshot

    if not folder.is_dir():
        return
    copy_outputs(folder, record)
    _write_json(folder / "test.json", snapshot(record, limit=None))
