"""``listen_late(member=k)``: a member listens only after its peers tried to connect to it.

Multi-node start-up has an order nobody writes down: the head listens, then the workers join.
Pods and hosts start in any order, and a worker that runs ``ray start --address=head`` before
the head listens fails unless it waits (ai-dynamo/dynamo#14115). This fault makes that order
happen: member ``k``'s bind of its port (the port it is told, ``{port}``) is held, right before
it happens, until every peer (every other member, or those in ``peers``) has tried to connect
to that port, or ``timeout`` seconds have passed. A peer that tries once and gives up dies of
``ECONNREFUSED``; one that retries until the head listens survives.

What it sees: binds made in Python (``socket.bind``, as port faults do) and connects made in
Python (``socket.connect``, the child runtime's footprint). A head that binds in native code
is never held, and peers that connect in native code are never seen: the fault is then not
met, and the launch fails saying so, unless ``allow_miss=True``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_startup_guard.checks import flag, seconds, whole_number
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.faults.port_base import LOOPBACK_CONFLICTS
from pytest_startup_guard.faults.process import ArmedProcessFault, FaultContext, described
from pytest_startup_guard.faults.protocol import FaultEffect
from pytest_startup_guard.runtime.events import AccessEvent

WHERE = "listen_late()"
DEFAULT_TIMEOUT = 10.0  # seconds the bind is held at most
ASK_AGAIN = 0.005  # seconds the held process sleeps before it asks again
HEARD_WAIT = 0.5  # seconds a judgement waits for the controller to hear what a peer said


@dataclass(frozen=True)
class ListenLate:
    member: int
    peers: tuple[int, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT
    allow_miss: bool = False

    process_fault: ClassVar[bool] = True

    def describe(self) -> str:
        return described(
            "listen_late",
            f"member={self.member}",
            f"peers={self.peers!r}" if self.peers is not None else None,
            f"timeout={self.timeout:g}" if self.timeout != DEFAULT_TIMEOUT else None,
            allow_miss=self.allow_miss,
        )

    def named_members(self) -> tuple[int, ...]:
        """The member indexes it names: checked against the launch's count at the call."""
        return (self.member, *(self.peers or ()))

    def arm(self, context: FaultContext) -> ArmedListenLate:
        where = f"{self.describe()} ({context.where})"
        count = len(context.ports)
        involved = (self.member, *(self.peers or ()))
        for index in involved:
            if index >= count:
                raise InvalidArgumentError(
                    f"invalid member {index} in {where}: expected a member index from 0 to"
                    f" {count - 1} (count={count})"
                )
        if count < 2:
            raise InvalidArgumentError(
                f"{where} needs peers: a launch of one member has nobody to connect to it;"
                " launch two members or more"
            )
        port = context.ports[self.member]
        if port is None:
            raise InvalidArgumentError(
                f"{where} holds member {self.member}'s bind of its port, but this launch gives"
                " it none: put {port} in the command"
            )
        peers = (
            self.peers
            if self.peers is not None
            else tuple(index for index in range(count) if index != self.member)
        )
        context.controller.report_binds()
        context.controller.record_footprint()
        return ArmedListenLate(self, context, port, peers)


def listen_late(
    member: int,
    *,
    peers: Sequence[int] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    allow_miss: bool = False,
) -> ListenLate:
    """A fault for ``server_fleet.launch(faults=[...])``: member ``member``'s bind of its port
    waits until each of ``peers`` (default: every other member) tried to connect to that port,
    at most ``timeout`` seconds. Unless ``allow_miss=True``, the launch fails if the bind was
    never held or a peer never tried."""
    index = whole_number("member", member, WHERE)
    chosen: tuple[int, ...] | None = None
    if peers is not None:
        if not isinstance(peers, (list, tuple)):
            raise ArgumentTypeError(
                f"invalid peers={peers!r} for {WHERE}: expected a list of member indexes"
            )
        chosen = tuple(whole_number("peers", peer, WHERE) for peer in peers)
        if not chosen or index in chosen:
            raise InvalidArgumentError(
                f"invalid peers={peers!r} for {WHERE}: expected other members than"
                f" member={index}, at least one"
            )
    flag("allow_miss", allow_miss, WHERE)
    return ListenLate(
        member=index,
        peers=chosen,
        timeout=seconds("timeout", timeout, WHERE, positive=True),
        allow_miss=allow_miss,
    )


@dataclass(eq=False)  # a listener: compared by identity
class ArmedListenLate(ArmedProcessFault):
    fault: ListenLate
    port: int
    peers: tuple[int, ...]
    held_since: float | None = None
    held_pid: int | None = None  # the process whose bind is held
    bound_t: float | None = None  # when the held bind went on
    tried: dict[int, float] = field(default_factory=dict)  # peer -> its first connect, t
    let_go: str | None = None
    seen: int = 0  # footprint events looked at so far
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def met(self) -> bool:
        return self.bound_t is not None and self.let_go is None

    @property
    def effects(self) -> list[FaultEffect]:
        """The member whose bind was held, and the peers that tried to connect before it."""
        if self.held_since is None:
            return []
        member, port = self.fault.member, self.port
        held = [FaultEffect(member, self.held_pid, f"its bind of port {port} was held")]
        return held + [
            FaultEffect(peer, None, f"it tried to connect to port {port} before it was bound")
            for peer in sorted(self.tried)
        ]

    def on_bind(self, event: AccessEvent) -> float | None:
        if self.closed or self.bound_t is not None:
            return None
        if self.member_index(event) != self.fault.member or event.port != self.port:
            return None
        if (event.host or "") not in LOOPBACK_CONFLICTS:  # a bind that serves 127.0.0.1
            return None
        with self.lock:
            now = time.monotonic()
            if self.held_since is None:
                self.held_since, self.held_pid = now, event.pid
            self._look_for_connects()
            missing = [peer for peer in self.peers if peer not in self.tried]
            if missing and now - self.held_since < self.fault.timeout:
                return ASK_AGAIN
            if missing:
                self.let_go = (
                    f"member(s) {', '.join(map(str, missing))} did not try to connect to port"
                    f" {self.port} within {self.fault.timeout:g} s (a connect in native code is"
                    " not seen)"
                )
            self.bound_t = now
            return None

    def _look_for_connects(self) -> None:
        """The peers' connects to the port, from the footprint the processes report."""
        controller = self.context.controller
        events = controller.footprint
        wanted = {f"127.0.0.1:{self.port}", f"localhost:{self.port}", f"[::1]:{self.port}"}
        for footprint in events[self.seen :]:
            if footprint.op != "socket.connect" or footprint.path not in wanted:
                continue
            record = controller.processes.get(footprint.pid)
            if record is None or record.member is None:
                continue
            if not record.member.startswith(self.context.group):
                continue
            index = record.member_index
            if index in self.peers and index not in self.tried:
                self.tried[index] = footprint.t
        self.seen = len(events)

    def why_missed(self) -> str:
        head = f"{self.fault.describe()} ({self.context.where}) was never met"
        if self.let_go is not None:
            return f"{head}: {self.let_go}"
        return (
            f"{head}: member {self.fault.member} never bound port {self.port} in Python (a"
            " server that listens from native code cannot be held)"
        )

    def lines(self) -> list[str]:
        if self.held_since is None:
            return [f"{self.fault.describe()}: the bind of port {self.port} was never seen"]
        tried = ", ".join(
            f"member {peer} {self.since_release(t)}" for peer, t in sorted(self.tried.items())
        )
        held = (
            f"held {(self.bound_t - self.held_since) * 1000:.0f} ms"
            if self.bound_t is not None
            else "still held"
        )
        return [
            f"{self.fault.describe()}: member {self.fault.member}'s bind of port {self.port}"
            f" {held}; connects tried: {tried or 'none'}"
        ]

    def cause(self, index: int) -> str | None:
        if index == self.fault.member:
            return None
        # A peer is judged when it exits, maybe before the controller read what it said last:
        # its connects are notices, sent without a reply. Everything a process said is heard
        # once its connection closed (``fate``).
        controller = self.context.controller
        label = f"{self.context.group}{index}"
        with controller.lock:
            pids = [pid for pid, record in controller.processes.items() if record.member == label]
        for pid in pids:
            controller.fate(pid, timeout=HEARD_WAIT)
        with self.lock:  # a peer may be judged before the held bind asked again
            self._look_for_connects()
        if index not in self.tried or (
            self.bound_t is not None and self.tried[index] > self.bound_t
        ):
            return None
        return (
            f"it tried to connect to member {self.fault.member}'s port {self.port}"
            f" {self.since_release(self.tried[index])}, before that member listened"
            f" ({self.fault.describe()})"
        )
