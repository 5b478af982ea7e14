"""``fs_error(...)``: a process's own file operation fails with a chosen errno.

What a network file system, or a second host, does to a start-up: ``ESTALE`` on a folder
another client replaced, ``EBUSY`` on removing a folder in use, ``ENOSYS`` from ``flock`` where
the mount has no locks, ``EBADF`` from a shared lock on a file opened for writing only. The
child runtime stops each watched operation before it runs (``protocol.ACCESS_EVENTS``); the
fault answers the matching ones with the errno, and the process's call raises the ``OSError``
the system call would have given: the errno, its ``strerror``, the path(s) as the caller gave
them (``OSError`` picks the subclass: ``ENOENT`` is a ``FileNotFoundError``). Nothing is
changed on disk.

Which calls fail: those of an operation in ``op`` (every operation the runtime sees when not
given) on ``path`` or, for a folder, on it and anything under it (a rename counts when its old
or its new name matches), made by a process of the fleet (of member ``member`` only, when
given). Counted per process: its ``nth`` matching call fails, and the ``times - 1`` after it
(``times=None``: every one from the ``nth`` on, a persistent fault). Deterministic: the same
calls of the same processes fail in every run.
"""

from __future__ import annotations

import errno as errno_codes
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_startup_guard.checks import flag, whole_number
from pytest_startup_guard.checks import path as checked_path
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.faults.process import ArmedProcessFault, FaultContext, described, under
from pytest_startup_guard.faults.protocol import FaultEffect
from pytest_startup_guard.runtime.events import AccessAnswer, AccessEvent
from pytest_startup_guard.runtime.operations import (
    ACCEPTED,
    describe_ops,
    operation_events,
    operation_name,
)

WHERE = "fs_error()"
# The errnos network file systems and lock-less mounts give at start-up, named in errors.
USUAL_ERRNOS = ("ESTALE", "EBUSY", "EIO", "ENOSPC", "EACCES", "ENOSYS", "EBADF", "ENOENT")
SHOWN_FAILURES = 6  # failed calls listed per fault in a summary


def errno_of(value: object, argument: str, where: str) -> int:
    """The errno number of ``value``: a name of the errno module ("ESTALE") or a number it
    knows; anything else is an error naming it and the usual ones."""
    if isinstance(value, str):
        number = getattr(errno_codes, value, None) if value.isupper() else None
        if isinstance(number, int):
            return number
        raise InvalidArgumentError(
            f"invalid {argument}={value!r} for {where}: not an errno name; expected a name of"
            f" the errno module, e.g. {', '.join(USUAL_ERRNOS)}"
        )
    if isinstance(value, int) and not isinstance(value, bool):
        if value in errno_codes.errorcode:
            return value
        raise InvalidArgumentError(
            f"invalid {argument}={value!r} for {where}: no errno has that number; expected an"
            f" errno name or number, e.g. {', '.join(USUAL_ERRNOS)}"
        )
    raise ArgumentTypeError(
        f"invalid {argument}={value!r} for {where}: expected an errno name (str) such as"
        f" {', '.join(USUAL_ERRNOS)}, or its number"
    )


@dataclass(frozen=True)
class FsError:
    """``fs_error(error, path, ...)``: see the module's docstring."""

    errno: int
    path: str
    ops: tuple[str, ...] = ()  # audit events; (): every operation
    nth: int = 1
    times: int | None = 1
    member: int | None = None
    allow_miss: bool = False

    process_fault: ClassVar[bool] = True  # launch(faults=) arms it on the fleet's processes

    @property
    def error_name(self) -> str:
        return errno_codes.errorcode.get(self.errno, str(self.errno))

    def describe(self) -> str:
        return described(
            "fs_error",
            repr(self.error_name),
            repr(self.path),
            describe_ops(self.ops) if self.ops else None,
            f"nth={self.nth}" if self.nth != 1 else None,
            f"times={self.times}" if self.times != 1 else None,
            f"member={self.member}" if self.member is not None else None,
            allow_miss=self.allow_miss,
        )

    def named_members(self) -> tuple[int, ...]:
        """The member indexes it names: checked against the launch's count at the call."""
        return () if self.member is None else (self.member,)

    def arm(self, context: FaultContext) -> ArmedFsError:
        return ArmedFsError(self, context, context.watched_path(self.describe(), self.path))


def fs_error(
    error: str | int,
    path: str | os.PathLike[str],
    *,
    op: str | Sequence[str] | None = None,
    nth: int = 1,
    times: int | None = 1,
    member: int | None = None,
    allow_miss: bool = False,
) -> FsError:
    """A fault for ``server_fleet.launch(faults=[...])``: the fleet's processes' calls of
    ``op`` (every operation the child runtime sees, when not given) on ``path`` (and under it,
    for a folder) fail with errno ``error`` ("ESTALE", "EBUSY", "ENOSYS", ...): each process's
    ``nth`` matching call and the ``times - 1`` after it (``times=None``: every one from the
    ``nth`` on), in member ``member``'s processes only when given. ``path`` must lie under a
    folder of the test's own (``shared_dir``, ``hub_cache``, ``tmp_path``). Unless
    ``allow_miss=True``, the launch fails if no call ever failed."""
    number = errno_of(error, "error", WHERE)
    text = checked_path("path", path, WHERE)
    flag("allow_miss", allow_miss, WHERE)
    return FsError(
        errno=number,
        path=os.path.abspath(text),
        ops=() if op is None else operation_events(op, "op", WHERE),
        nth=whole_number("nth", nth, WHERE, minimum=1),
        times=None if times is None else whole_number("times", times, WHERE, minimum=1),
        member=None if member is None else whole_number("member", member, WHERE),
        allow_miss=allow_miss,
    )


@dataclass(frozen=True)
class FailedCall:
    """A call the fault made fail."""

    pid: int
    member: int
    op: str  # audit event
    path: str
    other: str | None
    t: float

    def describe(self) -> str:
        what = f"{operation_name(self.op)} {self.path}"
        if self.other is not None:
            what += f" -> {self.other}" if self.op == "os.rename" else f" (to {self.other})"
        return what


@dataclass(eq=False)  # a listener: compared by identity
class ArmedFsError(ArmedProcessFault):
    fault: FsError
    paths: tuple[str, ...]  # the path as given and with its folders resolved
    failed: list[FailedCall] = field(default_factory=list)
    seen: dict[int, int] = field(default_factory=dict)  # pid -> matching calls counted
    calls: list[tuple[int, str, str, float]] = field(default_factory=list)  # (pid, op, path, t)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def met(self) -> bool:
        return bool(self.failed)

    @property
    def effects(self) -> list[FaultEffect]:
        return [
            FaultEffect(
                call.member, call.pid, f"its {call.describe()} failed with {self.fault.error_name}"
            )
            for call in self.failed
        ]

    def _matches(self, event: AccessEvent) -> str | None:
        for path in event.paths():
            if any(under(path, mine) for mine in self.paths):
                return path
        return None

    def on_access(self, event: AccessEvent) -> AccessAnswer | None:
        if self.closed or event.again:
            return None
        index = self.member_index(event)
        if index is None or (self.fault.member is not None and index != self.fault.member):
            return None
        path = self._matches(event)
        if path is None:
            return None
        with self.lock:
            self.calls.append((event.pid, event.op, path, event.t))
            if self.fault.ops and event.op not in self.fault.ops:
                return None
            count = self.seen.get(event.pid, 0) + 1
            self.seen[event.pid] = count
            last = None if self.fault.times is None else self.fault.nth + self.fault.times - 1
            if count < self.fault.nth or (last is not None and count > last):
                return None
            self.failed.append(
                FailedCall(event.pid, index, event.op, event.path, event.other, event.t)
            )
        return AccessAnswer(errno=self.fault.errno)

    def why_missed(self) -> str:
        fault = self.fault
        head = f"{fault.describe()} ({self.context.where}) was never met"
        if not self.calls:
            return (
                f"{head}: no process of the fleet touched {fault.path}"
                f"{' (member ' + str(fault.member) + ')' if fault.member is not None else ''}:"
                " is it the path the servers use? (the child runtime sees "
                f"{ACCEPTED}; stat and exists are not seen)"
            )
        ops = sorted({operation_name(op) for _pid, op, _path, _t in self.calls})
        if fault.ops and not set(fault.ops) & {op for _pid, op, _path, _t in self.calls}:
            return f"{head}: the fleet's processes made {', '.join(ops)} there, never the op asked"
        most = max(self.seen.values(), default=0)
        return (
            f"{head}: each process made at most {most} matching call(s) ({', '.join(ops)}),"
            f" fewer than nth={fault.nth}"
        )

    def lines(self) -> list[str]:
        if not self.failed:
            return [f"{self.fault.describe()}: never met"]
        shown = "; ".join(
            f"pid {call.pid} (member {call.member}) {call.describe()} {self.since_release(call.t)}"
            for call in self.failed[:SHOWN_FAILURES]
        )
        more = (
            f" and {len(self.failed) - SHOWN_FAILURES} more"
            if len(self.failed) > SHOWN_FAILURES
            else ""
        )
        return [
            f"{self.fault.describe()}: {len(self.failed)} call(s) failed with"
            f" {self.fault.error_name}: {shown}{more}"
        ]

    def cause(self, index: int) -> str | None:
        calls = [call for call in self.failed if call.member == index]
        if not calls:
            return None
        first = calls[0]
        return (
            f"its {first.describe()} failed with {self.fault.error_name}"
            f" ({os.strerror(self.fault.errno)}) from {self.fault.describe()}"
            + (f", and {len(calls) - 1} more call(s)" if len(calls) > 1 else "")
        )
