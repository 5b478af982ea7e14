"""Which process a pid is: its start time, its peer credentials, and signalling only that one.

A pid names a process only while it runs: once it has ended and been reaped, the kernel may hand
the number to an unrelated process. What the test side knows by pid (a process that said hello,
a registered fleet member) is therefore kept with the process's start time, and a signal goes
out only while the pid still has that start time (``signal_process``):

- ``start_time(pid)``: on Linux field 22 of ``/proc/<pid>/stat``, clock ticks since boot (two
  processes that hold the same pid one after the other never share it); elsewhere psutil's
  ``create_time`` in milliseconds; None when the process is gone;
- ``signal_process(pid, started, number)``: on Linux a pidfd is opened first and the start
  time read after it, so the signal reaches the process the pidfd holds, never one that took
  the pid in between; without pidfds, a check and then ``os.kill`` (a window of microseconds);
- ``ancestors(pid)``: the pids of its parent, its parent's parent and so on, from the kernel;
- ``peer_credentials(sock)``: the pid and uid of the process at the other end of a Unix socket,
  from the kernel (``SO_PEERCRED``, Linux), not from what that process says; None elsewhere;
- ``boot_id()`` and ``pid_namespace()``: what an owner file needs to tell a dead owner from a
  live one after a reboot or from another pid namespace.

The test side only (the controller, the fleet, the reaper): standard library at import.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import sys
from typing import NamedTuple

_STAT_STATE = 0  # fields after the command's closing ")": field 3 of /proc/<pid>/stat
_STAT_PPID = 1  # field 4
_STAT_PGRP = 2  # field 5
_STAT_START = 19  # field 22: starttime, clock ticks after boot
_LINUX = sys.platform.startswith("linux")


class ProcStat(NamedTuple):
    """What ``/proc/<pid>/stat`` tells of a process: its state letter (``R``, ``S``, ``Z`` a
    zombie, ``X`` dead, ...), its process group, its start time (clock ticks after boot) and
    its parent's pid."""

    state: bytes
    pgid: int
    started: int
    ppid: int = 0

    @property
    def runs(self) -> bool:
        """Not a zombie nor dead: it runs (a zombie only waits to be reaped)."""
        return self.state not in (b"Z", b"X")


def proc_stat(pid: int) -> ProcStat | None:
    """``pid``'s ``/proc/<pid>/stat`` facts (Linux); None if it is gone or cannot be read.

    Split after the last ")": the command in between may hold spaces and parentheses."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return ProcStat(
            fields[_STAT_STATE],
            int(fields[_STAT_PGRP]),
            int(fields[_STAT_START]),
            int(fields[_STAT_PPID]),
        )
    except (OSError, IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    """When ``pid``'s current process started (comparable only with this function's other
    answers on this machine); None when no process has that pid, or it cannot be read."""
    if _LINUX:
        facts = proc_stat(pid)
        return None if facts is None else facts.started
    import psutil

    try:
        return round(psutil.Process(pid).create_time() * 1000)
    except psutil.Error:
        return None


def ancestors(pid: int, most: int = 64) -> tuple[int, ...]:
    """The pids of ``pid``'s parent, its parent's parent, ... up to (not counting) pid 1 or 0,
    as the kernel tells them now (Linux: ``/proc``; elsewhere psutil); () when ``pid`` is gone
    or cannot be read. At most ``most`` of them: a chain cannot loop, but it is not trusted."""
    if not _LINUX:
        import psutil

        try:
            return tuple(parent.pid for parent in psutil.Process(pid).parents() if parent.pid > 1)
        except psutil.Error:
            return ()
    chain: list[int] = []
    facts = proc_stat(pid)
    while facts is not None and facts.ppid > 1 and len(chain) < most:
        chain.append(facts.ppid)
        facts = proc_stat(facts.ppid)
    return tuple(chain)


def same_process(pid: int, started: int | None) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` (None: never known)."""
    return started is not None and start_time(pid) == started


def running(pid: int, started: int | None) -> bool:
    """``same_process``, and not a zombie: it still runs (a zombie only waits to be reaped)."""
    if not _LINUX:
        return same_process(pid, started)
    facts = proc_stat(pid)
    return facts is not None and started is not None and facts.started == started and facts.runs


def signal_process(pid: int, started: int | None, number: int) -> bool:
    """Send signal ``number`` to ``pid`` only if it is still the process that started at
    ``started``; whether it was sent. A pid whose start time is not known is never signalled."""
    if started is None or pid <= 0:
        return False
    descriptor = _pidfd(pid)
    try:
        if start_time(pid) != started:
            return False  # gone, or the pid now names another process: leave it alone
        if descriptor is not None:
            # The pidfd was opened before the start time matched: it holds that very process.
            signal.pidfd_send_signal(descriptor, number)
        else:
            os.kill(pid, number)
        return True
    except OSError:
        return False
    finally:
        if descriptor is not None:
            os.close(descriptor)


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None or not hasattr(signal, "pidfd_send_signal"):
        return None
    try:
        descriptor: int = opener(pid)
    except OSError:  # gone, or a kernel before 5.3: the check-then-kill path
        return None
    return descriptor


def peer_credentials(sock: socket.socket) -> tuple[int, int] | None:
    """``(pid, uid)`` of the process that connected ``sock`` (a Unix stream socket), as the
    kernel recorded them at ``connect``; None where the platform does not tell (not Linux)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid, uid


def boot_id() -> str:
    """This boot's random id (Linux); "" where there is none to read."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``, Linux): pids of another one mean
    other processes; "" where there is none to read."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


__all__ = [
    "ProcStat",
    "ancestors",
    "boot_id",
    "peer_credentials",
    "pid_namespace",
    "proc_stat",
    "running",
    "same_process",
    "signal_process",
    "start_time",
]
