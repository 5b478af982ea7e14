"""The reaper: kills fleet processes and removes plan folders when pytest dies without teardown.

pytest-timeout's thread method ends pytest with ``os._exit``; a SIGKILL ends it with nothing
run at all. Fleet members live in sessions of their own, so nothing else would stop them, and
the child runtime's plan folder (``sg-*`` in the temp dir: control socket, barrier FIFOs,
``dumps/``) would stay on disk. The reaper is a small process in its own session, started once
per pytest process and told at start the temp dirs plan folders are made in (``--temp-dir``).
pytest writes lines to its stdin:

- ``add <pid> <create_time> <pgid>`` / ``remove <pid>``: a process tree to end;
- ``folder <path>`` / ``unfolder <path>``: a plan folder to remove (the path is the rest of the
  line). Only a folder that the rule of ``folder_allowed`` accepts is taken: an absolute,
  normalised path whose name starts with ``sg-`` and whose parent is one of the ``--temp-dir``
  folders, exactly as given; at removal it must still be a real directory (not a symlink)
  owned by the reaper's user. Anything else is refused with a line on stderr.

A line it cannot read is skipped (a line on stderr), never the end of the reaper. When the pipe
reaches end of file (pytest is gone, by whatever means), it terminates every registered process
tree that is still alive, then (nothing runs that could still write there) removes every
registered folder (``shutil.rmtree``, errors ignored).

Standard library, psutil and ``runtime.process_group`` only, the last two loaded only to end trees.
"""

from __future__ import annotations

import itertools
import os
import signal
import stat
import sys

# Not typing's, and no dataclasses, subprocess or threading at import: the reaper process loads
# this module at every start, and needs none of them (the pytest side imports what it uses).
TYPE_CHECKING = False

if TYPE_CHECKING:
    import subprocess
    import threading
    from collections.abc import Iterable, Sequence
    from typing import IO

    import psutil

    from pytest_startup_guard.runtime.process_group import ByPid

GRACE_SECONDS = 5.0
PLAN_PREFIX = "sg-"  # RuntimeController.start: tempfile.mkdtemp(prefix="sg-", dir=<temp dir>)


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


def terminate_trees(entries: list[_Entry], grace: float = GRACE_SECONDS) -> None:
    """SIGTERM every process of the trees (and of their process groups), SIGKILL the rest."""
    # Imported here, like psutil: the reaper starts with every pytest process that launches a
    # fleet, and mostly just reads its stdin; ending trees happens at most once, at its end.
    from pytest_startup_guard.runtime.process_group import ByPid, end_trees

    end_trees(
        [ByPid(process) for process in _victims(entries)],
        # Every entry's group, even where its process is gone: what it started may be left.
        [entry.pgid for entry in entries],
        grace,
        wait=_wait_procs,
        # Nothing runs after the reaper: what left the trees but stayed in a group ends now.
        always_kill_groups=True,
    )


def _victims(entries: list[_Entry]) -> list[psutil.Process]:
    """Every process of the registered trees, as they are now (children came after ``add``)."""
    import psutil

    victims: dict[int, psutil.Process] = {}
    for entry in entries:
        if not _same_process(entry):
            continue
        try:
            root = psutil.Process(entry.pid)
            for process in [root, *root.children(recursive=True)]:
                victims[process.pid] = process
        except psutil.Error:
            pass
    return list(victims.values())


def _wait_procs(victims: Sequence[ByPid], seconds: float) -> list[ByPid]:
    """The victims still running after ``seconds``, as ``psutil.wait_procs`` sees them (unlike
    ``ByPid.ended``, a zombie counts as running until its parent reaps it)."""
    import psutil

    _, alive = psutil.wait_procs([victim.process for victim in victims], timeout=seconds)
    return [victim for victim in victims if victim.process in alive]


def plan_temp_dirs() -> list[str]:
    """Where ``RuntimeController.start`` makes plan folders (keep in step with it): the temp
    dir, or ``/tmp`` where the temp dir's path is too long for a Unix socket's. pytest side."""
    import tempfile

    base = tempfile.gettempdir()
    return [base if len(base) <= 60 else "/tmp"]


def folder_allowed(path: str, temp_dirs: Iterable[str]) -> bool:
    """The rule for ``folder`` lines: an absolute, normalised path (no ``..``, ``.``, ``//`` or
    trailing ``/``) whose name starts with ``sg-`` (and goes on) and whose parent is one of
    ``temp_dirs`` as given (normalised): a plugin-made plan folder and nothing else."""
    if not os.path.isabs(path) or os.path.normpath(path) != path or "\0" in path:
        return False
    parent, name = os.path.split(path)
    if not name.startswith(PLAN_PREFIX) or len(name) <= len(PLAN_PREFIX):
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


def _parse_temp_dirs(argv: Sequence[str]) -> list[str]:
    return [value for flag, value in itertools.pairwise(argv) if flag == "--temp-dir"]


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for pytest, which then tears down
    serve(_parse_temp_dirs(sys.argv[1:]), sys.stdin.buffer)
    return 0


def serve(temp_dirs: Sequence[str], stdin: Iterable[bytes]) -> None:
    """Read registrations until end of file, then end the trees and remove the folders."""
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
    if entries:  # end of file with live registrations: pytest died without its teardown
        terminate_trees(list(entries.values()))
    # After the trees: a process of theirs could still write into a plan folder.
    remove_folders(folders)


class Reaper:
    """The pytest side: one reaper process per pytest process, started on first use."""

    def __init__(self) -> None:
        import threading

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
                [sys.executable, "-m", "pytest_startup_guard.fleet.reaper", *temp_args],
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
