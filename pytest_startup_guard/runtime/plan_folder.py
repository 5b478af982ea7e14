"""Plan folders: ``sg-*`` straight in the temp dir, each naming its owner, and finding the ones
whose owner is gone.

The child runtime's controller keeps its plan in such a folder (control socket, barrier FIFOs,
stack dumps), and the start-method checks their ``sitecustomize``. A folder is removed by its
owner, or by the reaper when its owner dies; when both died (a machine stopped, a container
killed), it would stay. So each folder has an ``owner`` file, written right after ``mkdtemp``:
``<pid> <start time> <boot id> <pid namespace>`` of the process that made it. A folder is
stale when that process provably is gone: another boot, or, in this pid namespace, the pid no
longer has that start time. A folder without an owner file (made by an older version, or being
made right now), or whose owner lived in another pid namespace, is never stale.

The test side only: standard library at import.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pytest_startup_guard.runtime.process_identity import (
    boot_id,
    pid_namespace,
    start_time,
)

PLAN_PREFIX = "sg-"
OWNER_FILE = "owner"
# AF_UNIX paths are short (104-108 bytes): a plan folder straight in a temp dir this short.
MAX_TEMP_DIR = 60


def plan_temp_dir() -> str:
    """Where plan folders are made: the temp dir, or ``/tmp`` where its path is too long for a
    Unix socket's."""
    base = tempfile.gettempdir()
    return base if len(base) <= MAX_TEMP_DIR else "/tmp"


def is_plan_folder_name(name: str) -> bool:
    """Whether ``name`` is a plan folder's: ``sg-`` and more after it."""
    return name.startswith(PLAN_PREFIX) and len(name) > len(PLAN_PREFIX)


def make_plan_folder(prefix: str = PLAN_PREFIX) -> Path:
    """A new private folder ``<prefix>*`` in ``plan_temp_dir()``, with its owner file."""
    if not prefix.startswith(PLAN_PREFIX):
        raise ValueError(f"a plan folder's prefix starts with {PLAN_PREFIX!r}, not {prefix!r}")
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=plan_temp_dir()))
    started = start_time(os.getpid())
    if started is not None:
        line = f"{os.getpid()} {started} {boot_id() or '-'} {pid_namespace() or '-'}\n"
        (folder / OWNER_FILE).write_text(line)
    return folder


def owner_gone(folder: str | os.PathLike[str]) -> bool:
    """Whether the process that made ``folder`` provably no longer runs (see the module)."""
    owner = _read_owner(os.path.join(folder, OWNER_FILE))
    if owner is None:
        return False
    parts = owner.split()
    if len(parts) != 4 or not parts[0].isdigit() or not parts[1].isdigit():
        return False
    pid, started, boot, namespace = int(parts[0]), int(parts[1]), parts[2], parts[3]
    this_boot = boot_id()
    if boot == "-" or not this_boot:
        return False  # a boot id that could not be read proves nothing: never guess "gone"
    if boot != this_boot:
        return True  # made before this boot: nothing of that boot runs now
    if namespace != (pid_namespace() or "-"):
        return False  # its pid means another process here: nothing can be told
    return start_time(pid) != started


def stale_plan_folders(temp_dirs: Iterable[str]) -> list[str]:
    """Every ``sg-*`` folder straight in ``temp_dirs``: a real directory (not a symlink) of this
    user's, whose owner is gone."""
    stale = []
    uid = os.geteuid()
    for temp_dir in temp_dirs:
        try:
            names = os.listdir(temp_dir)
        except OSError:
            continue
        for name in names:
            if not is_plan_folder_name(name):
                continue
            path = os.path.join(temp_dir, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode) and info.st_uid == uid and owner_gone(path):
                stale.append(path)
    return stale


def _read_owner(path: str) -> str | None:
    """The owner file's first line; None unless it is a regular file (never a link or FIFO)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        return os.read(descriptor, 512).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(descriptor)


__all__ = [
    "MAX_TEMP_DIR",
    "OWNER_FILE",
    "PLAN_PREFIX",
    "is_plan_folder_name",
    "make_plan_folder",
    "owner_gone",
    "plan_temp_dir",
    "stale_plan_folders",
]
