"""The reaper: ends the run's processes and removes plan folders when pytest dies without teardown.

pytest-timeout's thread method ends pytest with ``os._exit``; a SIGKILL ends it with nothing
run at all. Fleet members live in sessions of their own, so nothing else would stop them, and
the child runtime's plan folder (``sg-*`` in the temp dir: control socket, barrier FIFOs,
``dumps/``) would stay on disk. The reaper is a small process in its own session, started once
per pytest process (before the first process the plugin starts) and told at start the temp dirs
plan folders are made in (``--temp-dir``) and the run id it answers for (``--run``: every
process the plugin starts carries ``STARTUP_GUARD_RUN=<run id>:<tree>``, ``run_marker``).
At its start it removes the plan folders of earlier runs whose owner is gone
(``plan_folder.stale_plan_folders``). pytest writes lines to its stdin:

- ``add <pid> <create_time> <pgid>`` / ``remove <pid>``: a process tree to end;
- ``folder <path>`` / ``unfolder <path>``: a plan folder to remove (the path is the rest of the
  line). Only a folder that the rule of ``folder_allowed`` accepts is taken: an absolute,
  normalised path whose name starts with ``sg-`` and whose parent is one of the ``--temp-dir``
  folders, exactly as given; at removal it must still be a real directory (not a symlink)
  owned by the reaper's user. Anything else is refused with a line on stderr.

A line it cannot read is skipped (a line on stderr), never the end of the reaper. When the pipe
reaches end of file (pytest is gone, by whatever means, or done), it ends every registered
process tree that is still alive and every process of ours that carries the run id, a daemon
that left its tree and group included (SIGTERM, SIGKILL after 5 s), then (nothing runs that
could still write there) removes every registered folder (``shutil.rmtree``, errors ignored).
A registered process is signalled only while its pid has the start time it was registered
with, and a group only while its leader is that process or a process in it carries the run id.

Standard library and ``runtime.plan_folder`` at import (the stale plan folders go at its start);
psutil and ``runtime.process_group`` only when it ends what is left.
"""

from __future__ import annotations

import itertools
import os
import signal
import stat
import sys

# Standard library only: the reaper removes stale plan folders at every start.
from pytest_startup_guard.runtime.plan_folder import (
    is_plan_folder_name,
    plan_temp_dir,
    stale_plan_folders,
)

# Not typing's, and no dataclasses, subprocess or threading at import: the reaper process loads
# this module at every start, and needs none of them (the pytest side imports what it uses).
TYPE_CHECKING = False

if TYPE_CHECKING:
    import subprocess
    import threading
    from collections.abc import Callable, Iterable, Sequence
    from typing import IO

    import psutil

GRACE_SECONDS = 5.0


class _Entry:
    __slots__ = ("create_time", "pgid", "pid")

    def __init__(self, pid: int, create_time: float, pgid: int) -> None:
        self.pid = pid
        self.create_time = create_time
        self.pgid = pgid


def _same_process(entry: _Entry) -> bool:
    import psutil

    try:
        return abs(psutil.Process(entry.pid).create_time() - entry.create_time) < 0.05
    except psutil.Error:
        return False


def terminate_trees(
    entries: list[_Entry], grace: float = GRACE_SECONDS, run_id: str | None = None
) -> None:
    """SIGTERM every process of the trees, of their process groups and, with ``run_id``, every
    process of ours that carries it; SIGKILL the rest after ``grace``, and what started since."""
    # Imported here, like psutil: the reaper starts with every pytest process that launches a
    # fleet, and mostly just reads its stdin; ending trees happens at most once, at its end.
    from pytest_startup_guard.runtime.process_group import (
        ByPid,
        Group,
        Target,
        end_late,
        end_trees,
        marked,
    )

    targets: list[Target] = [ByPid(process) for process in _victims(entries)] if entries else []
    if run_id is not None:
        known = {target.process.pid for target in targets if isinstance(target, ByPid)}
        targets += marked(run_id, whole_run=True, spare=known)
    end_trees(
        targets,
        # Every entry's group, even where its process is gone (what it started may be left),
        # as long as it is provably still that group (``_group_proof``).
        [Group(entry.pgid, _group_proof(entry, run_id)) for entry in entries],
        grace,
        # Nothing runs after the reaper: what left the trees but stayed in a group ends now.
        always_kill_groups=True,
    )
    if run_id is not None:
        end_late(run_id, whole_run=True)


def _group_proof(entry: _Entry, run_id: str | None) -> Callable[[], bool]:
    """Whether the entry's group is still the one its member led: the member still runs (it
    holds its pid, the group's id), or a process in the group carries the run id."""

    def proof() -> bool:
        from pytest_startup_guard.runtime.run_marker import group_carries

        if entry.pgid == entry.pid and _same_process(entry):
            return True
        return run_id is not None and group_carries(entry.pgid, run_id, whole_run=True)

    return proof


def _victims(entries: list[_Entry]) -> list[psutil.Process]:
    """Every process of the registered trees, as they are now (children came after ``add``)."""
    import psutil

    from pytest_startup_guard.runtime.process_tree import ProcessTree

    victims: dict[int, psutil.Process] = {}
    tree = ProcessTree()  # the process table read once, for every registered tree
    for entry in entries:
        try:
            root = psutil.Process(entry.pid)
            # The start time psutil pinned, not a fresh look: the same process it will signal.
            if abs(root.create_time() - entry.create_time) >= 0.05:
                continue
            for process in [root, *tree.descendants(root)]:
                victims[process.pid] = process
        except psutil.Error:
            pass
    return list(victims.values())


def plan_temp_dirs() -> list[str]:
    """Where plan folders are made (``plan_folder.plan_temp_dir``). pytest side."""
    return [plan_temp_dir()]


def folder_allowed(path: str, temp_dirs: Iterable[str]) -> bool:
    """The rule for ``folder`` lines: an absolute, normalised path (no ``..``, ``.``, ``//`` or
    trailing ``/``) whose name starts with ``sg-`` (and goes on) and whose parent is one of
    ``temp_dirs`` as given (normalised): a plugin-made plan folder and nothing else."""
    if not os.path.isabs(path) or os.path.normpath(path) != path or "\0" in path:
        return False
    parent, name = os.path.split(path)
    if not is_plan_folder_name(name):
        return False
    return parent in {os.path.normpath(folder) for folder in temp_dirs if os.path.isabs(folder)}


def remove_folders(folders: Iterable[str]) -> None:
    """Remove each folder that is still a real directory of this user's (never a symlink)."""
    import shutil

    for folder in folders:
        try:
            info = os.lstat(folder)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            shutil.rmtree(folder, ignore_errors=True)


def _say(message: str) -> None:
    try:
        print(f"startup-guard reaper: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _values(argv: Sequence[str], flag: str) -> list[str]:
    return [value for given, value in itertools.pairwise(argv) if given == flag]


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for pytest, which then tears down
    runs = _values(sys.argv[1:], "--run")
    serve(_values(sys.argv[1:], "--temp-dir"), sys.stdin.buffer, runs[-1] if runs else None)
    return 0


def remove_stale_folders(temp_dirs: Sequence[str]) -> None:
    """Remove the plan folders of runs whose pytest and reaper both died (their owner is gone)."""
    remove_folders(stale_plan_folders(temp_dirs))


def serve(temp_dirs: Sequence[str], stdin: Iterable[bytes], run_id: str | None = None) -> None:
    """Remove stale plan folders; read registrations until end of file; then end the trees and
    the processes that carry ``run_id``, and remove the folders."""
    remove_stale_folders(temp_dirs)
    entries: dict[int, _Entry] = {}
    folders: dict[str, None] = {}  # in the order registered
    for raw in stdin:
        line = os.fsdecode(raw).rstrip("\n")
        command, _, rest = line.partition(" ")
        parts = line.split()
        try:
            if command == "add" and len(parts) == 4:
                entries[int(parts[1])] = _Entry(int(parts[1]), float(parts[2]), int(parts[3]))
            elif command == "remove" and len(parts) == 2:
                entries.pop(int(parts[1]), None)
            elif command == "folder" and folder_allowed(rest, temp_dirs):
                folders[rest] = None
            elif command == "folder":
                _say(f"refused folder {rest!r}: not an sg-* folder directly under {temp_dirs}")
            elif command == "unfolder":
                folders.pop(rest, None)
            else:
                _say(f"skipped a line it cannot read: {line!r}")
        except ValueError:
            _say(f"skipped a line it cannot read: {line!r}")
    # End of file. With live registrations, pytest died without its teardown; either way, what
    # still carries the run id has outlived its test (a daemon that left its tree and group).
    if entries or run_id is not None:
        terminate_trees(list(entries.values()), run_id=run_id)
    # After the trees: a process of theirs could still write into a plan folder.
    remove_folders(folders)


class Reaper:
    """The pytest side: one reaper process per pytest process, started on first use. It is the
    run's keeper (``run_marker.Keeper``): ``run_id`` is in every process the plugin starts."""

    def __init__(self) -> None:
        import threading

        from pytest_startup_guard.runtime.run_marker import new_run_id

        self.run_id = new_run_id()
        self._process: subprocess.Popen[str] | None = None
        self._stdin: IO[str] | None = None
        self._lock: threading.Lock = threading.Lock()

    def _start(self) -> IO[str]:
        if self._stdin is None:
            import subprocess

            env = {
                key: value
                for key, value in os.environ.items()
                if not key.startswith("STARTUP_GUARD_")
            }
            temp_args = [arg for folder in plan_temp_dirs() for arg in ("--temp-dir", folder)]
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pytest_startup_guard.fleet.reaper",
                    *temp_args,
                    "--run",
                    self.run_id,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                text=True,
                # Paths travel as the file system names them (main reads with os.fsdecode).
                encoding=sys.getfilesystemencoding(),
                errors="surrogateescape",
            )
            assert self._process.stdin is not None
            self._stdin = self._process.stdin
        return self._stdin

    def watch(self) -> None:
        """Start the reaper process now, before a process of the run starts: if this process
        dies from now on, the reaper ends every process that carries ``run_id``."""
        with self._lock:
            self._start()

    def add(self, pid: int) -> None:
        self.add_all([pid])

    def add_all(self, pids: list[int]) -> None:
        """Register processes in one write: a fleet's members once all are started (a write
        each would wake the reaper once per member while the fleet is starting)."""
        import psutil

        lines = []
        for pid in pids:
            try:
                create_time = psutil.Process(pid).create_time()
                pgid = os.getpgid(pid)
            except (psutil.Error, OSError):
                continue
            lines.append(f"add {pid} {create_time} {pgid}\n")
        if not lines:
            return
        with self._lock:
            stream = self._start()
            stream.write("".join(lines))
            stream.flush()

    def remove(self, pid: int) -> None:
        with self._lock:
            if self._stdin is not None:
                self._stdin.write(f"remove {pid}\n")
                self._stdin.flush()

    def add_folder(self, path: str | os.PathLike[str]) -> None:
        """Have the reaper remove a plan folder (``sg-*`` straight in the temp dir, the rule of
        ``folder_allowed``; it refuses any other) if pytest dies before ``remove_folder``."""
        text = os.fspath(path)
        if "\n" in text:
            return  # not a plan folder, and no line could carry it
        with self._lock:
            stream = self._start()
            stream.write(f"folder {text}\n")
            stream.flush()

    def remove_folder(self, path: str | os.PathLike[str]) -> None:
        """The folder was removed (or is the test's again): the reaper leaves it alone."""
        text = os.fspath(path)
        with self._lock:
            if self._stdin is not None and "\n" not in text:
                self._stdin.write(f"unfolder {text}\n")
                self._stdin.flush()

    def close(self) -> None:
        """Normal end of the session: every fleet was stopped; let the reaper exit."""
        import subprocess

        with self._lock:
            if self._stdin is not None:
                self._stdin.close()
                self._stdin = None
            if self._process is not None:
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                self._process = None


if __name__ == "__main__":
    sys.exit(main())
