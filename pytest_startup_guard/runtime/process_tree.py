"""The descendants of many processes from one look at every process's parent.

``psutil.Process.children(recursive=True)`` reads the parent of every process on the machine
(``/proc/<pid>/stat`` of each) at each call. Stopping a fleet asks it for every member and every
Python process that reported in under one: with a launch of 17 forked members, 34 reads of the
whole process table. ``ProcessTree`` reads that table once and walks it for each root, with the
same guard psutil has against a reused pid: a child older than the process it descends from is
another process that took a freed pid, and it is left out.

The test side only (the fleet and the reaper).
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil


class ProcessTree:
    """Every process's children, as the process table was at construction."""

    def __init__(self) -> None:
        import psutil

        ppid_map = getattr(psutil, "_ppid_map", None)
        parents: dict[int, int] = {}
        if callable(ppid_map):
            parents = dict(ppid_map())
        else:  # a psutil without its one-shot map: the same table, a process at a time
            for process in psutil.process_iter(["ppid"]):
                ppid = process.info.get("ppid")
                if isinstance(ppid, int):
                    parents[process.pid] = ppid
        self._children: dict[int, list[int]] = collections.defaultdict(list)
        for pid, ppid in parents.items():
            self._children[ppid].append(pid)

    def descendants(self, root: psutil.Process) -> list[psutil.Process]:
        """``root``'s descendants, each as a ``psutil.Process`` that pinned its start time
        (psutil's ``children(recursive=True)``, without reading the table again)."""
        import psutil

        try:
            root_started = root.create_time()
        except psutil.Error:
            return []
        found: list[psutil.Process] = []
        seen: set[int] = set()
        stack = [root.pid]
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue  # a pid reused while the table was read can make it loop
            seen.add(pid)
            for child_pid in self._children.get(pid, ()):
                try:
                    child = psutil.Process(child_pid)
                    if root_started <= child.create_time():  # else a reused pid: not ours
                        found.append(child)
                        stack.append(child_pid)
                except (psutil.NoSuchProcess, psutil.ZombieProcess):
                    pass
        return found


__all__ = ["ProcessTree"]
