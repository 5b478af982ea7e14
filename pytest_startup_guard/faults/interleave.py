"""``interleave(path, first=(j, m), then=(i, n))``: two members' accesses in a chosen order.

Two servers running the same start-up code race each other: both generate the same sources
into one workspace (NVIDIA/TensorRT-LLM#18897), both build the same cache entry. Whether it
breaks depends on how their steps interleave, which no test controls on its own. This fault
fixes the order: member ``i``'s ``n``th access under ``path`` waits, right before it is made,
until member ``j`` has made its ``m``th access there. An access is reported before its call
runs, so ``j``'s counts as made once ``j``'s process is heard of again (its next access in the
watched folder), once that process ended, or ``SETTLE`` (50 ms) of its own time after it was
answered. Accesses are counted per member, over its
whole process tree, of the operations in ``op`` (every file operation the child runtime sees,
when not given). Chain two to interleave step by step: ``first=(0, 1), then=(1, 1)`` and
``first=(1, 1), then=(0, 2)`` give A1, B1, A2.

The held process sleeps between asks (the controller is never blocked). It is let go at the
latest after ``timeout`` seconds, or when member ``j``'s processes have all ended: then the
order did not happen and, unless ``allow_miss=True``, the launch fails saying how far each
member got.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_startup_guard.checks import flag, seconds, whole_number
from pytest_startup_guard.checks import path as checked_path
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.faults.process import ArmedProcessFault, FaultContext, described, under
from pytest_startup_guard.faults.protocol import FaultEffect
from pytest_startup_guard.runtime.events import AccessAnswer, AccessEvent
from pytest_startup_guard.runtime.operations import describe_ops, operation_events
from pytest_startup_guard.runtime.own_time import OwnClock

WHERE = "interleave()"
DEFAULT_TIMEOUT = 10.0  # seconds the later access waits at most for the earlier one
ASK_AGAIN = 0.005  # seconds the held process sleeps before it asks again
# Seconds of its own time after the earlier access was answered that it counts as made when its
# process is not heard of again: the call runs right after the answer, in well under a
# millisecond of its time.
SETTLE = 0.05


def _step(value: object, name: str) -> tuple[int, int]:
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not all(isinstance(part, int) and not isinstance(part, bool) for part in value)
    ):
        raise ArgumentTypeError(
            f"invalid {name}={value!r} for {WHERE}: expected (member, nth): a member index and"
            " the number of its access under the path, e.g. (0, 1)"
        )
    member = whole_number(f"{name}[0] (member)", value[0], WHERE)
    nth = whole_number(f"{name}[1] (nth)", value[1], WHERE, minimum=1)
    return member, nth


@dataclass(frozen=True)
class Interleave:
    path: str
    first: tuple[int, int]
    then: tuple[int, int]
    ops: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    allow_miss: bool = False

    process_fault: ClassVar[bool] = True

    def describe(self) -> str:
        return described(
            "interleave",
            repr(self.path),
            f"first={self.first!r}",
            f"then={self.then!r}",
            describe_ops(self.ops) if self.ops else None,
            f"timeout={self.timeout:g}" if self.timeout != DEFAULT_TIMEOUT else None,
            allow_miss=self.allow_miss,
        )

    def named_members(self) -> tuple[int, ...]:
        """The member indexes it names: checked against the launch's count at the call."""
        return (self.first[0], self.then[0])

    def arm(self, context: FaultContext) -> ArmedInterleave:
        return ArmedInterleave(self, context, context.watched_path(self.describe(), self.path))


def interleave(
    path: str | os.PathLike[str],
    *,
    first: tuple[int, int],
    then: tuple[int, int],
    op: str | Sequence[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    allow_miss: bool = False,
) -> Interleave:
    """A fault for ``server_fleet.launch(faults=[...])``: member ``then[0]``'s
    ``then[1]``th access under ``path`` waits until member ``first[0]`` has made its
    ``first[1]``th access there (accesses of ``op`` only, when given), at most ``timeout``
    seconds. Unless ``allow_miss=True``, the launch fails if that order did not happen."""
    given = checked_path("path", path, WHERE)
    earlier, later = _step(first, "first"), _step(then, "then")
    if earlier[0] == later[0]:
        raise InvalidArgumentError(
            f"invalid first={first!r}, then={then!r} for {WHERE}: both name member"
            f" {earlier[0]}; a member's own accesses are already in order: name two members"
        )
    flag("allow_miss", allow_miss, WHERE)
    return Interleave(
        path=os.path.abspath(given),
        first=earlier,
        then=later,
        ops=() if op is None else operation_events(op, "op", WHERE),
        timeout=seconds("timeout", timeout, WHERE, positive=True),
        allow_miss=allow_miss,
    )


@dataclass(eq=False)  # a listener: compared by identity
class ArmedInterleave(ArmedProcessFault):
    fault: Interleave
    paths: tuple[str, ...]
    counts: dict[int, int] = field(default_factory=dict)  # member -> accesses counted
    reached_t: float | None = None  # when the earlier member made its access
    reached_pid: int | None = None  # the process that made it
    # The earlier process's own time from when the controller heard of its access, and how
    # long it had been held at accesses then (``RuntimeController.blocked_seconds``).
    reached_clock: OwnClock | None = None
    reached_blocked: float = 0.0
    completed: bool = False  # that access is over: the same process was heard of since
    held: tuple[int, str, float] | None = None  # (pid, path, since) of the later access
    let_go: str | None = None  # why the later access went on without the order: a miss
    done: bool = False  # the later access went on (in order, or let go)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def met(self) -> bool:
        return self.done and self.let_go is None

    @property
    def effects(self) -> list[FaultEffect]:
        """The later member's access, held until the earlier one's was made."""
        if not self.met or self.held is None:
            return []
        (first, m), (then, n) = self.fault.first, self.fault.then
        what = f"its access {n} under {self.fault.path} waited for member {first}'s access {m}"
        return [FaultEffect(then, self.held[0], what)]

    def _path(self, event: AccessEvent) -> str | None:
        if self.fault.ops and event.op not in self.fault.ops:
            return None
        for path in event.paths():
            if any(under(path, mine) for mine in self.paths):
                return path
        return None

    def on_access(self, event: AccessEvent) -> AccessAnswer | None:
        if self.closed:
            return None
        member = self.member_index(event)
        if member is None:
            return None
        with self.lock:
            if event.again:
                return self._still_held(event)
            if event.pid == self.reached_pid and not self.completed:
                self.completed = True  # its next access is reported: the earlier one is over
            path = self._path(event)
            if path is None:
                return None
            count = self.counts.get(member, 0) + 1
            self.counts[member] = count
            if (member, count) == self.fault.first and self.reached_t is None:
                self.reached_t, self.reached_pid = event.t, event.pid
                self.reached_clock = OwnClock(event.pid)
                self.reached_blocked = self.context.controller.blocked_seconds(event.pid)
            if (member, count) != self.fault.then or self.done:
                return None
            if self._over():
                self.done = True  # the order holds already
                return None
            self.held = (event.pid, path, time.monotonic())
            return AccessAnswer(wait=ASK_AGAIN)

    def _over(self) -> bool:
        """Whether the earlier access has been made, not only reported: it is reported before
        the call runs, so it counts as made once the same process was heard of again (its next
        access), once that process ended, or after ``SETTLE`` seconds of that process's own
        time since, less the time it was held waiting for the controller's answer: a busy
        machine does not make an access count as made before the process could make it."""
        clock, pid = self.reached_clock, self.reached_pid
        if clock is None or pid is None:
            return False
        if self.completed:
            return True
        controller = self.context.controller
        held = controller.blocked_seconds(pid) - self.reached_blocked
        if clock.own() - held >= SETTLE:
            return True
        record = controller.processes.get(pid)
        return record is not None and record.ended_t is not None

    def _still_held(self, event: AccessEvent) -> AccessAnswer | None:
        held = self.held
        if held is None or self.done or held[0] != event.pid:
            return None
        if self._over():
            self.done = True
            return None
        waited = time.monotonic() - held[2]
        earlier = self.fault.first[0]
        if waited >= self.fault.timeout:
            self.let_go = f"member {earlier} did not reach it within {self.fault.timeout:g} s"
        elif self._ended(earlier):
            self.let_go = f"member {earlier} ended before it reached it"
        if self.let_go is not None:
            self.done = True
            return None
        return AccessAnswer(wait=ASK_AGAIN)

    def _ended(self, index: int) -> bool:
        """Whether member ``index`` said hello and every process of its tree has ended."""
        label = f"{self.context.group}{index}"
        records = [
            record
            for record in self.context.controller.processes.values()
            if record.member == label
        ]
        return bool(records) and all(record.ended_t is not None for record in records)

    def why_missed(self) -> str:
        then = self.fault.then
        reached = ", ".join(
            f"member {member}: {count}" for member, count in sorted(self.counts.items())
        )
        if self.let_go is not None:
            why = f"member {then[0]}'s access {then[1]} went on without it: {self.let_go}"
        elif self.held is None:
            why = f"member {then[0]} never made access {then[1]} there"
        else:
            why = "the fleet stopped first"
        return (
            f"{self.fault.describe()} ({self.context.where}) was never met: {why}"
            f" (accesses counted under the path: {reached or 'none'})"
        )

    def lines(self) -> list[str]:
        if not self.met:
            return [f"{self.fault.describe()}: not met"]
        first, then = self.fault.first, self.fault.then
        held = ""
        if self.held is not None and self.reached_t is not None:
            held = f" (held {max(0.0, self.reached_t - self.held[2]) * 1000:.0f} ms)"
        return [
            f"{self.fault.describe()}: member {then[0]}'s access {then[1]} came after member"
            f" {first[0]}'s access {first[1]}{held}"
        ]

    def cause(self, index: int) -> str | None:
        if not self.met or index not in (self.fault.first[0], self.fault.then[0]):
            return None
        return f"it ran interleaved with another member by {self.fault.describe()}"
