"""The run's marker: an environment variable in every process the plugin starts, and finding the
processes that carry it.

Every process the plugin starts (fleet members, the import-race probe's and the start-method
checks' interpreters) gets ``STARTUP_GUARD_RUN=<run id>:<tree id>`` in its environment. The run
id is one pytest process's (its reaper's: pid and random digits), the tree id one launch's or
one probe call's. A process passes its environment on to what it starts, Python or not, and a
daemon that leaves its session and forks twice keeps it too: so ``carriers`` finds what a test
started even where it detached itself, by reading ``/proc/<pid>/environ`` of this user's
processes. That is the initial environment, as the process was exec'd: a process that clears
its ``os.environ`` still shows the marker; one exec'd with a cleared environment (``env -i``,
``sudo``, a service manager) does not, nor does what it starts.

The reaper's own environment drops every ``STARTUP_GUARD_*`` variable, and pytest's never has
its own run's marker, so neither matches; a pytest run inside a member (a nested run) gives its
own children its own run id, so a sweep of one run never reaches another's processes.

``Keeper``: the process that outlives pytest and ends the run's processes when pytest dies
(``fleet.reaper.Reaper``). The plugin installs it (``push_keeper``); the probe and the
start-method checks, below the fleet, find it here (``current_keeper``). Outside pytest there is
none, and the run id is this process's own.

Reading the environments is Linux only (``/proc``); elsewhere ``carriers`` finds nothing and the
process groups and trees are what ends a test's processes. The test side only: standard library.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from pytest_startup_guard.runtime.process_identity import proc_stat
from pytest_startup_guard.runtime.protocol import RUN_ENV


class Keeper(Protocol):
    """What outlives this process and, when it dies, ends every process of the run."""

    @property
    def run_id(self) -> str:
        """The run id its end sweeps (``<pid>-<random hex>``, no ``:``)."""
        ...

    def watch(self) -> None:
        """Make sure the keeper runs: from now on this process's death ends the run."""

    def add_folder(self, path: str | os.PathLike[str]) -> None:
        """Have the keeper remove a plan folder should this process die."""

    def remove_folder(self, path: str | os.PathLike[str]) -> None:
        """The folder is gone (or kept on purpose): leave it alone."""


_keepers: list[Keeper] = []  # a stack: a pytest run inside this process (pytester) pushes its own
_tree_numbers = itertools.count(1)
_own_run: tuple[int, str] | None = None  # (pid, run id) without a keeper


def new_run_id() -> str:
    """A run id no other run shares: this pid and 48 random bits."""
    return f"{os.getpid()}-{os.urandom(6).hex()}"


def push_keeper(keeper: Keeper) -> None:
    _keepers.append(keeper)


def pop_keeper(keeper: Keeper) -> None:
    if keeper in _keepers:
        _keepers.remove(keeper)


def current_keeper() -> Keeper | None:
    return _keepers[-1] if _keepers else None


def new_tree(keeper: Keeper | None = None) -> str:
    """A new tree marker ``<run id>:<n>`` of ``keeper``'s run (the current keeper's, else this
    process's own); the keeper is started first, so that the tree ends if this process dies."""
    global _own_run
    keeper = keeper if keeper is not None else current_keeper()
    if keeper is not None:
        keeper.watch()
        run = keeper.run_id
    else:
        if _own_run is None or _own_run[0] != os.getpid():  # a fork is a run of its own
            _own_run = (os.getpid(), new_run_id())
        run = _own_run[1]
    return f"{run}:{next(_tree_numbers)}"


def run_of(marker: str) -> str:
    """The run id of a tree marker."""
    return marker.rsplit(":", 1)[0]


@dataclass(frozen=True)
class Carrier:
    """A running process whose environment carries a marker: pid, group and start time."""

    pid: int
    pgid: int
    started: int


class _Sweep(threading.local):
    """What ``carriers`` found per (marker, whole_run) while a ``one_sweep`` block runs."""

    found: dict[tuple[str, bool], list[Carrier]] | None = None


_sweep = _Sweep()


@contextmanager
def one_sweep() -> Iterator[None]:
    """Within the block, ``carriers`` reads the environments once per marker: a round of
    signals proves each group by it (``process_group._send``), and every group of a fleet of 17
    would otherwise read every process's environment again, milliseconds apart."""
    if _sweep.found is not None:  # nested: the outer block's sweep
        yield
        return
    _sweep.found = {}
    try:
        yield
    finally:
        _sweep.found = None


def carriers(marker: str, *, whole_run: bool = False) -> list[Carrier]:
    """This user's running processes (not this one, no zombies) whose environment carries the
    tree ``marker``; with ``whole_run``, any tree of its run (``marker``: a tree marker of the
    run, or the run id itself). Linux only: elsewhere []. Inside ``one_sweep``, what the
    block's first call for the marker found."""
    if not sys.platform.startswith("linux"):
        return []
    swept = _sweep.found
    if swept is not None:
        key = (marker, whole_run)
        if key not in swept:
            swept[key] = _carriers(marker, whole_run)
        return list(swept[key])
    return _carriers(marker, whole_run)


def _carriers(marker: str, whole_run: bool) -> list[Carrier]:
    # NUL-delimited: the whole value of one tree; any value that begins with the run's id.
    value = run_of(marker) + ":" if whole_run else marker + "\0"
    wanted = f"\0{RUN_ENV}={value}".encode()
    found = []
    for pid in _own_pids():
        if _environ_has(pid, wanted):
            facts = proc_stat(pid)
            if facts is None or not facts.runs:
                continue  # gone since, or a zombie: it runs no more
            found.append(Carrier(pid, facts.pgid, facts.started))
    return found


def group_carries(pgid: int, marker: str, *, whole_run: bool = False) -> bool:
    """Whether a running process of group ``pgid`` carries ``marker`` (as ``carriers`` reads
    it): the group is that tree's, also after its leader was reaped (a group's id is its first
    leader's pid, and a pid is not handed out again while a group of that id has a process)."""
    return any(carrier.pgid == pgid for carrier in carriers(marker, whole_run=whole_run))


def _own_pids() -> Iterator[int]:
    """This user's processes but this one, from ``/proc`` (owner of ``/proc/<pid>``: the
    process's effective uid)."""
    uid, me = os.geteuid(), os.getpid()
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        yield int(entry.name)


def _environ_has(pid: int, wanted: bytes) -> bool:
    """Whether ``/proc/<pid>/environ`` (variables each ended by a NUL) holds ``wanted``, which
    begins with a NUL. Unreadable (gone, or a process that made itself undumpable): no."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return wanted in b"\0" + data + b"\0"


__all__ = [
    "RUN_ENV",
    "Carrier",
    "Keeper",
    "carriers",
    "current_keeper",
    "group_carries",
    "new_run_id",
    "new_tree",
    "one_sweep",
    "pop_keeper",
    "push_keeper",
    "run_of",
]
