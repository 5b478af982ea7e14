"""``network_fs(path)``: a shared folder as members on different hosts see it over NFS.

One machine, one real folder; each member of the fleet is treated as a host of its own, and the
fault answers the members' own file operations under ``path`` the way a network file system
answers a second client (the errnos are those NFS clients give; nothing changes on disk):

- **stale handles**: once a member replaced or removed a folder (``os.rename``/``os.replace``
  of it, or ``os.rmdir``), another member's process that had used that folder before (any
  access of it or under it) gets ``ESTALE`` at its next access there, once: its cached handle
  names a folder that is gone (hiyouga/LlamaFactory#3388);
- **busy**: removing a folder (``os.rmdir``) another member's live process uses, or renaming
  onto a file another member's live process opened, fails with ``EBUSY``: the other client
  still has it open (pytorch/pytorch#173679);
- **late renames**: for ``delay`` seconds after a member's rename, the other members do not see
  its new name yet: their accesses of it fail with ``ENOENT`` (attribute and lookup caching);
- **locks that do not exclude**: ``flock`` and ``lockf`` under ``path`` succeed for every
  caller (Lustre, GPFS, NFS mounts with ``local_lock``): ``lock_not_exclusive(path)``, added
  to the list ``network_fs`` returns.

"Uses" means made an access the child runtime saw: the faults cannot see a descriptor held
open, only that the process reached the folder. The first two are deterministic (the order of
the members' own operations decides them); the third depends on timing by nature, which is
why ``delay`` is short. Never vacuous: the launch fails if none of the first three ever
happened, unless ``allow_miss=True``.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_startup_guard.checks import flag, seconds, whole_number
from pytest_startup_guard.checks import path as checked_path
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.faults.fs_error import SHOWN_FAILURES
from pytest_startup_guard.faults.lock_not_exclusive import LockNotExclusive, lock_not_exclusive
from pytest_startup_guard.faults.process import (
    ArmedProcessFault,
    FaultContext,
    ProcessFault,
    described,
    under,
)
from pytest_startup_guard.faults.protocol import FaultEffect
from pytest_startup_guard.runtime.events import AccessAnswer, AccessEvent
from pytest_startup_guard.runtime.operations import operation_name

WHERE = "network_fs()"
DEFAULT_DELAY = 0.05  # seconds a rename stays unseen by the other members


@dataclass(frozen=True)
class NetworkFs:
    """The file-system part of ``network_fs(path, ...)``: see the module's docstring."""

    path: str
    members: tuple[int, ...] | None = None  # the members on hosts of their own; None: all
    delay: float = DEFAULT_DELAY
    allow_miss: bool = False

    process_fault: ClassVar[bool] = True

    def describe(self) -> str:
        return described(
            "network_fs",
            repr(self.path),
            f"members={self.members!r}" if self.members is not None else None,
            f"delay={self.delay:g}" if self.delay != DEFAULT_DELAY else None,
            allow_miss=self.allow_miss,
        )

    def named_members(self) -> tuple[int, ...]:
        """The member indexes it names: checked against the launch's count at the call."""
        return self.members or ()

    def arm(self, context: FaultContext) -> ArmedNetworkFs:
        resolved, paths = context.checked_path(self.describe(), self.path)
        if not os.path.isdir(resolved):
            raise InvalidArgumentError(
                f"invalid path={self.path!r} for {self.describe()} ({context.where}): expected"
                " an existing folder (the shared folder the members use), not "
                + ("a file" if os.path.exists(resolved) else "a path that does not exist")
            )
        context.controller.watch(resolved)
        return ArmedNetworkFs(self, context, paths)


def network_fs(
    path: str | os.PathLike[str],
    *,
    members: Sequence[int] | None = None,
    delay: float = DEFAULT_DELAY,
    allow_miss: bool = False,
) -> list[ProcessFault | LockNotExclusive]:
    """Faults for ``server_fleet.launch(faults=network_fs(shared_dir))``: the shared folder
    ``path`` as members on different hosts see it over a network file system (stale handles
    after another member replaced a folder, ``EBUSY`` removing a folder another member uses,
    a rename unseen by the others for ``delay`` seconds, locks that do not exclude).
    ``members``: the members that are each on a host of their own (default: all). Add it to
    other faults with ``faults=[*network_fs(path), port_taken(member=1)]``."""
    given = checked_path("path", path, WHERE)
    chosen: tuple[int, ...] | None = None
    if members is not None:
        if not isinstance(members, (list, tuple)):
            raise ArgumentTypeError(
                f"invalid members={members!r} for {WHERE}: expected a list of member indexes"
            )
        chosen = tuple(whole_number("members", member, WHERE) for member in members)
        if len(chosen) < 2:
            raise InvalidArgumentError(
                f"invalid members={members!r} for {WHERE}: a network file system needs two"
                " hosts at least: give two member indexes or more (or none: every member)"
            )
    flag("allow_miss", allow_miss, WHERE)
    text = os.path.abspath(given)
    return [
        NetworkFs(
            path=str(text),
            members=chosen,
            delay=seconds("delay", delay, WHERE),
            allow_miss=allow_miss,
        ),
        # Met or not, it is part of the picture: the first fault says whether anything was met.
        lock_not_exclusive(text, allow_miss=True),
    ]


@dataclass(frozen=True)
class NfsAnswer:
    """An operation the fault made fail: what, by whom, why."""

    kind: str  # "stale", "busy", "late rename"
    errno: int
    pid: int
    member: int
    op: str
    path: str
    t: float
    because: str  # "member 0 replaced it at +0.120 s"

    def words(self) -> str:
        """What it did, for a member's reason: ``its os.rmdir of /x failed with EBUSY (...)``."""
        return (
            f"its {operation_name(self.op)} of {self.path} failed with"
            f" {errno.errorcode[self.errno]} ({self.kind}: {self.because})"
        )


@dataclass(eq=False)  # a listener: compared by identity
class ArmedNetworkFs(ArmedProcessFault):
    fault: NetworkFs
    roots: tuple[str, ...]
    answers: list[NfsAnswer] = field(default_factory=list)
    # folder -> (member, pid, t) of whoever replaced or removed it last
    replaced: dict[str, tuple[int, int, float]] = field(default_factory=dict)
    used: dict[int, set[str]] = field(default_factory=dict)  # pid -> paths it accessed
    member_of: dict[int, int] = field(default_factory=dict)  # pid -> member index
    stale_told: set[tuple[int, str]] = field(default_factory=set)  # (pid, folder) answered
    renamed: dict[str, tuple[int, float]] = field(default_factory=dict)  # new name -> (member, t)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def met(self) -> bool:
        return bool(self.answers)

    @property
    def effects(self) -> list[FaultEffect]:
        return [FaultEffect(answer.member, answer.pid, answer.words()) for answer in self.answers]

    def _inside(self, path: str) -> bool:
        return any(under(path, root) for root in self.roots)

    def _live_users(self, path: str, member: int) -> list[tuple[int, int]]:
        """(pid, member) of other members' live processes that used ``path`` or under it."""
        users = []
        for pid, paths in self.used.items():
            other = self.member_of.get(pid)
            if other is None or other == member or not self._alive(pid):
                continue
            if any(under(used, path) for used in paths):
                users.append((pid, other))
        return users

    def _alive(self, pid: int) -> bool:
        record = self.context.controller.processes.get(pid)
        return record is not None and record.ended_t is None

    def on_access(self, event: AccessEvent) -> AccessAnswer | None:
        if self.closed or event.again:
            return None
        member = self.member_index(event)
        if member is None or (self.fault.members is not None and member not in self.fault.members):
            return None
        paths = [path for path in event.paths() if self._inside(path)]
        if not paths:
            return None
        with self.lock:
            self.member_of[event.pid] = member
            answer = self._answer(event, member, paths)
            if answer is None:
                self._note(event, member, paths)
                return None
            self.answers.append(answer)
            return AccessAnswer(errno=answer.errno)

    def _answer(self, event: AccessEvent, member: int, paths: list[str]) -> NfsAnswer | None:
        now = time.monotonic()
        for path in paths:
            for folder, (by, _pid, t) in self.replaced.items():
                if (
                    by == member
                    or not under(path, folder)
                    or (event.pid, folder) in self.stale_told
                ):
                    continue
                if any(under(used, folder) for used in self.used.get(event.pid, ())):
                    self.stale_told.add((event.pid, folder))
                    return self._made("stale", errno.ESTALE, event, member, path,
                                      f"member {by} replaced {folder} {self.since_release(t)}")  # fmt: skip
        if event.op == "os.rmdir" or (
            event.op == "os.rename" and os.path.exists(event.other or "")
        ):
            target = event.path if event.op == "os.rmdir" else (event.other or "")
            users = self._live_users(target, member)
            if users:
                pid, other = users[0]
                what = "uses it" if event.op == "os.rmdir" else "has it open"
                return self._made("busy", errno.EBUSY, event, member, target,
                                  f"pid {pid} (member {other}) {what}")  # fmt: skip
        if event.op not in ("os.rename", "os.mkdir", "os.symlink", "os.link"):
            for path in paths:
                for name, (by, t) in self.renamed.items():
                    if by != member and under(path, name) and now - t < self.fault.delay:
                        return self._made("late rename", errno.ENOENT, event, member, path,
                                          f"member {by} renamed it {self.since_release(t)}")  # fmt: skip
        return None

    def _made(
        self, kind: str, number: int, event: AccessEvent, member: int, path: str, because: str
    ) -> NfsAnswer:
        return NfsAnswer(kind, number, event.pid, member, event.op, path, event.t, because)

    def _note(self, event: AccessEvent, member: int, paths: list[str]) -> None:
        """What the operation, about to proceed, changes for the other hosts."""
        self.used.setdefault(event.pid, set()).update(paths)
        if event.op == "os.rename":
            if os.path.isdir(event.path):
                self.replaced[event.path] = (member, event.pid, event.t)
            if event.other is not None:
                if os.path.isdir(event.other):
                    self.replaced[event.other] = (member, event.pid, event.t)
                self.renamed[event.other] = (member, event.t)
        elif event.op == "os.rmdir":
            self.replaced[event.path] = (member, event.pid, event.t)

    def why_missed(self) -> str:
        return (
            f"{self.fault.describe()} ({self.context.where}) was never met: no member replaced"
            " or removed a folder another member had used, removed or renamed onto what another"
            " member used, or looked up a name another member had just renamed"
            f" (accesses seen under it: {sum(len(paths) for paths in self.used.values())})"
        )

    def lines(self) -> list[str]:
        if not self.answers:
            return [f"{self.fault.describe()}: never met"]
        shown = "; ".join(
            f"{answer.kind}: pid {answer.pid} (member {answer.member})"
            f" {operation_name(answer.op)} {answer.path} -> {errno.errorcode[answer.errno]}"
            f" ({answer.because})"
            for answer in self.answers[:SHOWN_FAILURES]
        )
        return [f"{self.fault.describe()}: {shown}"]

    def cause(self, index: int) -> str | None:
        answers = [answer for answer in self.answers if answer.member == index]
        if not answers:
            return None
        return f"{answers[0].words()} from {self.fault.describe()}"
