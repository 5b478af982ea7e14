"""The test side of the child runtime: one controller per test.

It creates the plan (a Unix socket in a short private temp folder), hands out the environment
children need, receives their hellos and access events, answers synchronous triggers by calling
the registered listeners before it replies, holds fleet members at the start barrier and
releases them together, asks live processes for their stacks, and at the end tells which
processes reported in. Every wait has a deadline: it never blocks pytest forever.

Once ``report_binds`` was called, processes that say hello from then on also report each
``socket.bind`` of an internet address (``AccessEvent`` with op ``socket.bind`` and path
``host:port``, kept in ``binds``, not in ``accesses``); a bind listener may answer with a number
of seconds to wait, and the child asks again after that long (the controller's thread is
never blocked by it). Once ``report_probes`` was called, they also report each close of a TCP
socket they bound (``ProbeEvent``, kept in ``probes``; ``RuntimeListener.on_probe``), which may
wait the same way.

Once ``record_footprint`` was called, processes that say hello from then on also report,
without waiting, every file they change and every address they reach (``footprint``: a
``FootprintEvent`` per operation, see ``footprint``).

How each process ended is told twice: by the process itself (``bye``: its exit status when it
knows it, and the cause, its first uncaught exception) and by its Python parent when that
reaps it (``reaped``: the exit code, negative for a signal, as ``Popen.returncode``), which is
the truth and wins. ``fate(pid)`` is the latest record of a pid once it ended; a pid that says
hello again without having ended exec'd (``exec_t``): that is not an exit. Reaps of children
that never said hello (not Python, or not under the plan) are kept in ``reaped``.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from pytest_startup_guard.checks import path as checked_path
from pytest_startup_guard.checks import text as checked_text
from pytest_startup_guard.checks import whole_number
from pytest_startup_guard.lifetimes import lives_for_its_test
from pytest_startup_guard.runtime import child as childruntime
from pytest_startup_guard.runtime.barrier import BarrierGroup
from pytest_startup_guard.runtime.events import (
    BIND_OP,
    LOOK_OPS,
    TEST_PROCESS,
    AccessAnswer,
    AccessCallback,
    AccessEvent,
    AccessListener,
    LockEvent,
    ProbeEvent,
    ProcessRecord,
    RuntimeListener,
    bind_path,
    file_op,
)
from pytest_startup_guard.runtime.footprint import FootprintEvent
from pytest_startup_guard.runtime.holds import AccessHolds
from pytest_startup_guard.runtime.native.doubles import NativeDoubles
from pytest_startup_guard.runtime.plan_folder import make_plan_folder
from pytest_startup_guard.runtime.process_identity import ancestors, start_time
from pytest_startup_guard.runtime.protocol import PLAN_ENV, PROTOCOL_VERSION, encode, encode_plan
from pytest_startup_guard.runtime.senders import NAMING_OPS, Refusal, speaker, speaks_for
from pytest_startup_guard.runtime.server import Connection, PlanServer
from pytest_startup_guard.runtime.stacks import stacks_of

_OK = encode({"ok": 1})
_Answer = TypeVar("_Answer")  # what a listener's method returns
_MAX_LOCAL_WAIT = 0.05  # seconds: the longest one "wait" answer holds the test process at once


def _ended(record: ProcessRecord, t: float) -> None:
    record.ended_t = t if record.ended_t is None else min(record.ended_t, t)


@lives_for_its_test
class RuntimeController:
    """Serves the plan of one test. Use as a context manager, or call ``start``/``close``."""

    def __init__(self, *, reply_timeout: float = 30.0, barrier_timeout: float = 30.0) -> None:
        self.reply_timeout = reply_timeout
        self.barrier_timeout = barrier_timeout
        self.processes: dict[int, ProcessRecord] = {}
        self.history: list[ProcessRecord] = []  # every hello, also of pids seen twice (exec)
        self.accesses: list[AccessEvent] = []
        # Looks at a path (os.stat and its kin, ``LOOK_OPS``): apart from the accesses, which
        # are what access points, reads and changes are counted from.
        self.looks: list[AccessEvent] = []
        # How long each process was held at its accesses, and when each access went on.
        self._holds = AccessHolds()
        self.binds: list[AccessEvent] = []  # socket.bind events, once report_binds() was called
        self.probes: list[ProbeEvent] = []  # probes' closes, once report_probes() was called
        self._report_probes = False
        self._lock_faults: dict[str, tuple[str, ...]] = {}  # fleet group -> faulted lock paths
        # What processes changed and reached, once record_footprint() was called.
        self.footprint: list[FootprintEvent] = []
        self._record_footprint = False
        # Children reaped by a Python parent that never said hello: pid -> (exit code, t).
        self.reaped: dict[int, tuple[int, float]] = {}
        self.errors: list[str] = []
        self.refused: list[Refusal] = []  # messages about a pid their sender may not speak for
        self._listeners: list[RuntimeListener] = []
        self._report_binds = False
        self._watched: list[str] = []
        self._groups: dict[str, BarrierGroup] = {}
        self._lock = threading.RLock()
        self._arrival = threading.Condition(self._lock)
        self._folder: Path | None = None
        self._server: PlanServer | None = None
        self._closing = False
        self._in_process = False
        self._group_counter = 0
        self._expected: dict[int, str] = {}
        self._native_doubles = NativeDoubles()  # the libc calls of accesses Python reported
        # What each message's ``op`` is handled by (``_handle``); notices get no reply.
        self._handlers: dict[str, Callable[[Connection, dict[str, Any]], None]] = {
            "hello": self._hello,
            "access": self._access,
            "bind": self._bind,
            "probe": self._probe,
            "lock": self._lock_call,
            "released": self._released_at,  # a notice
            "bye": self._bye,  # a notice
            "reaped": self._reaped,  # a notice
            "footprint": self._footprint,  # a notice
        }

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> RuntimeController:
        # A private folder straight in a short temp dir (a Unix socket's path is short), with
        # an owner file: a later run removes it should this process and its reaper both die.
        self._folder = make_plan_folder()
        (self._folder / "dumps").mkdir()
        self._server = PlanServer(self._handle, self._dropped, self.errors)
        self._server.start(str(self._folder / "ctl.sock"))
        return self

    def __enter__(self) -> RuntimeController:
        return self.start() if self._server is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving (children carry on unobserved) and remove the plan's folder."""
        if self._closing:
            return
        self._closing = True
        if self._in_process:
            childruntime.deactivate_in_process()
            self._in_process = False
        if self._server is not None:
            self._server.close()
        for group in self._groups.values():
            group.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    @property
    def folder(self) -> Path:
        assert self._folder is not None, "controller not started"
        return self._folder

    # -- the plan --------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """What a child needs in its environment to run the child runtime under this plan."""
        plan = {
            "v": PROTOCOL_VERSION,
            "socket": str(self.folder / "ctl.sock"),
            "dumps": str(self.folder / "dumps"),
            "reply_timeout": self.reply_timeout,
            "barrier_timeout": self.barrier_timeout,
        }
        return {PLAN_ENV: encode_plan(plan)}

    def watch(self, folder: str | os.PathLike[str]) -> None:
        """Report accesses under ``folder`` (as given and resolved) from now on."""
        given = os.path.abspath(checked_path("folder", folder, "child_runtime.watch()"))
        with self._lock:
            for path in {given, os.path.realpath(given)}:
                prefix = path.rstrip(os.sep) + os.sep
                if prefix not in self._watched:
                    self._watched.append(prefix)
            if self._in_process:
                childruntime.activate_in_process(tuple(self._watched), self._local_access)

    @property
    def watched(self) -> tuple[str, ...]:
        return tuple(self._watched)

    def subscribe(self, listener: RuntimeListener) -> None:
        """``listener`` hears every event from now on (``RuntimeListener``)."""
        if not isinstance(listener, RuntimeListener):
            raise TypeError(
                f"invalid listener {listener!r} for child_runtime.subscribe(): expected a"
                " RuntimeListener (subclass it, override on_access, on_bind, on_release or"
                " on_gone); for a plain function of each access use add_listener(fn)"
            )
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: RuntimeListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def add_listener(self, listener: AccessListener) -> None:
        """``listener(event)`` runs before every watched access is allowed to proceed."""
        if not callable(listener):
            raise TypeError(
                f"invalid listener {listener!r} for child_runtime.add_listener(): expected a"
                " function of one AccessEvent"
            )
        self.subscribe(AccessCallback(listener))

    def remove_listener(self, listener: AccessListener) -> None:
        with self._lock:
            self._listeners = [
                known
                for known in self._listeners
                if not (isinstance(known, AccessCallback) and known.callback == listener)
            ]

    def record_footprint(self) -> None:
        """Processes that say hello from now on report their footprint: every file they write,
        create, rename, remove, link or chmod and every address they connect to or look up,
        without waiting (``footprint``: ``FootprintEvent``). Runs that never ask pay nothing."""
        with self._lock:
            self._record_footprint = True

    def report_binds(self) -> None:
        """Processes that say hello from now on report their binds of internet addresses."""
        with self._lock:
            self._report_binds = True

    def report_probes(self) -> None:
        """Processes that say hello from now on report each close of a TCP socket they bound
        to an internet address (``ProbeEvent``), and wait for the reply."""
        with self._lock:
            self._report_probes = True

    def fault_locks(self, group: str, paths: Iterable[str]) -> None:
        """Processes of fleet ``group`` (members and their descendants) that say hello from now
        on lock nothing with ``fcntl.flock``/``fcntl.lockf`` on ``paths`` (absolute, resolved;
        a folder: every file under it), and report each such call (``LockEvent``)."""
        with self._lock:
            self._lock_faults[group] = tuple(paths)

    @property
    def lock(self) -> threading.RLock:
        """Held while listeners run: take it to read or change what they share."""
        return self._lock

    def _released(self, t: float) -> None:
        self._ask_listeners(lambda listener: listener.on_release(t), "a fleet's release")

    def _failed(self, listener: RuntimeListener, what: str, error: Exception) -> None:
        """A listener's exception is a test error: kept, and the controller goes on."""
        self.errors.append(
            f"listener {type(listener).__qualname__} failed on {what}:"
            f" {type(error).__name__}: {error}"
        )

    def watch_test_process(self) -> None:
        """Also watch the test process's own accesses (for in-process start-ups)."""
        with self._lock:
            self._in_process = True
            childruntime.activate_in_process(tuple(self._watched), self._local_access)

    def barrier(self, size: int, name: str | None = None) -> BarrierGroup:
        with self._lock:
            self._group_counter += 1
            name = name or f"fleet{self._group_counter}"
            group = BarrierGroup(
                name, size, str(self.folder / f"barrier-{name}"), self._arrival, self._released
            )
            group.open()
            self._groups[group.name] = group
            return group

    # -- what happened ---------------------------------------------------------------------

    def expect(self, pid: int, label: str) -> None:
        """Say that ``pid`` runs Python with this plan: ``unreached_expected`` reports it if it
        never says hello (its interpreter lacks the plugin, or runs with ``-S``)."""
        where = "child_runtime.expect()"
        pid = whole_number("pid", pid, where, minimum=1)
        label = checked_text("label", label, where, meaning="a name for the process")
        with self._lock:
            self._expected[pid] = label

    def unreached_expected(self) -> list[str]:
        """``plan never reached pid N (label)`` for every expected process that never reported."""
        with self._lock:
            return [
                f"plan never reached pid {pid} ({label})"
                for pid, label in self._expected.items()
                if pid not in self.processes
            ]

    def reached(self, pid: int) -> bool:
        with self._lock:
            return pid in self.processes

    def unreached(self, pids: Iterable[int]) -> list[int]:
        with self._lock:
            return [pid for pid in pids if pid not in self.processes]

    def members_reached(self, group: str) -> set[int]:
        """Indexes of ``group`` members for which at least one Python process reported in."""
        with self._lock:
            return {
                record.member_index
                for record in self.history
                if record.member is not None
                and record.member.rsplit(":", 1)[0] == group
                and record.member_index is not None
            }

    def fate(self, pid: int, timeout: float = 0.0) -> ProcessRecord | None:
        """The latest record of ``pid`` (None if it never said hello), once everything it said
        has been heard (its connection closed), waiting up to ``timeout`` seconds for that.

        ``exit_code`` is then what it said at its exit, unless its parent's reap told more:
        a parent under the plan reports before it exits itself, so wait for the parent's fate
        first where the reap matters (a worker killed by a signal says no bye)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                record = self.processes.get(pid)
                remaining = deadline - time.monotonic()
                if (record is not None and record.gone_t is not None) or remaining <= 0:
                    return record
                self._arrival.wait(min(remaining, 0.05))

    def blocked_seconds(self, pid: int) -> float:
        """Seconds ``pid`` has spent held at its accesses, from each access until its reply,
        and while a "wait" answer kept it asking: time the plugin took, which a hold in the
        process's own time must not count."""
        with self._lock:
            return self._holds.blocked_seconds(pid)

    def in_flight(self) -> bool:
        """Whether a message of some process has reached the controller (or its socket) and
        is not handled yet: an access made before a window's hold passed may be waiting there,
        and must meet the window as it was when it was made."""
        return self._server is not None and self._server.in_flight()

    def accesses_of(self, pid: int) -> list[AccessEvent]:
        with self._lock:
            return [event for event in self.accesses if event.pid == pid]

    def dump_stacks(self, pid: int, timeout: float = 3.0) -> str | None:
        """The Python stacks of every thread of a live process that registered its dump."""
        with self._lock:
            record = self.processes.get(pid)
        return None if record is None else stacks_of(record, timeout)

    # -- serving ---------------------------------------------------------------------------

    def _hello_reply(self, barrier: BarrierGroup | None, member: str | None = None) -> bytes:
        reply: dict[str, Any] = {"ok": 1, "watch": list(self._watched)}
        locks = self._lock_faults.get(member.rsplit(":", 1)[0]) if member else None
        if locks:
            reply["locks"] = list(locks)
        if self._report_binds:
            reply["binds"] = 1
        if self._report_probes:
            reply["probes"] = 1
        if self._record_footprint:
            reply["footprint"] = 1
        if barrier is not None:
            reply["barrier"] = barrier.fifo
        return encode(reply)

    def _dropped(self, connection: Connection) -> None:
        """Its connection closed: the process is gone (or exec'd, which is no end)."""
        pid = connection.pid
        if pid is not None:
            with self._lock:
                record = connection.record
                if record is not None and record.gone_t is None:
                    record.gone_t = time.monotonic()
                    if record.exec_t is None:  # an exec is no end: its pid goes on
                        _ended(record, record.gone_t)
                self._arrival.notify_all()
                self._ask_listeners(
                    lambda listener: listener.on_gone(pid), f"the exit of pid {pid}"
                )

    def _handle(self, connection: Connection, message: dict[str, Any]) -> None:
        op = message.get("op")
        handler = self._handlers.get(op) if isinstance(op, str) else None
        if handler is None:
            raise ValueError(f"unknown message {op!r}")
        if op in NAMING_OPS:  # believed only for its sender (``senders``)
            pid = speaks_for(connection, op, message.get("pid"), self.processes.get)
            if isinstance(pid, Refusal):
                with self._lock:
                    self.refused.append(pid)
                    self.errors.append(str(pid))
                if not message.get("noreply"):
                    connection.sock.sendall(_OK)  # go on, unheard
                return
            message["pid"], message["by"] = pid, speaker(connection)
        handler(connection, message)

    def _access(self, connection: Connection, message: dict[str, Any]) -> None:
        if self._native_doubles.is_double(message):  # reported by its Python audit hook
            connection.sock.sendall(_OK)
            return
        other = message.get("other")
        event = AccessEvent(
            pid=int(message["pid"]),
            member=self._member_of(int(message["pid"])),
            op=file_op(message["ev"]),
            path=str(message["path"]),
            t=float(message["t"]),
            tid=int(message.get("tid", 0)),
            other=None if other is None else str(other),
            again=bool(message.get("again")),
            site=None if message.get("site") is None else str(message["site"]),
            writes=bool(message.get("writes")),
            native=bool(message.get("native")),
        )
        answer = self._dispatch(event)
        self._native_doubles.answered(message, failed=bool(answer and answer.errno))
        connection.sock.sendall(_encode_answer(answer))
        with self._lock:  # the process was held from its access until this reply
            self._holds.replied(event, answer)

    def _bind(self, connection: Connection, message: dict[str, Any]) -> None:
        """A bind: ask the listeners (the longest wait); one that goes on now is in ``binds``."""
        pid = int(message["pid"])
        event = AccessEvent(
            pid=pid,
            member=self._member_of(pid),
            op=BIND_OP,
            path=bind_path(str(message["host"]), int(message["port"])),
            t=float(message["t"]),
            tid=int(message.get("tid", 0)),
        )
        with self._lock:
            wait = _longest_wait(
                self._ask_listeners(
                    lambda listener: listener.on_bind(event), f"the bind of {event.path}"
                )
            )
            if not wait:
                self.binds.append(event)
        connection.sock.sendall(_wait_reply(wait))

    def _released_at(self, connection: Connection, message: dict[str, Any]) -> None:
        """A member left the barrier (a notice: no reply)."""
        with self._lock:
            if connection.pid in self.processes:
                self.processes[connection.pid].released_t = float(message["t"])

    def _footprint(self, connection: Connection, message: dict[str, Any]) -> None:
        """An operation's footprint (a notice: no reply)."""
        footprint = FootprintEvent.from_message(message)
        with self._lock:
            self.footprint.append(footprint)

    def _hello(self, connection: Connection, message: dict[str, Any]) -> None:
        claimed = int(message["pid"])
        # The kernel's pid of the connecting process, not the one it says, where the kernel
        # tells (Linux: SO_PEERCRED; elsewhere the claimed one, in a folder only we can enter).
        pid = connection.peer_pid if connection.peer_pid is not None else claimed
        connection.hello_pid = claimed
        member = message.get("member")
        native = bool(message.get("native"))  # the interposer of runtime/native
        if native and message.get("python"):
            # The interposer of a Python process, once its child runtime said hello: the
            # process has its record; this connection carries what its native code accesses.
            with self._lock:
                reply = self._hello_reply(None, member)
            connection.sock.sendall(reply)
            return
        record = ProcessRecord(
            pid=pid,
            ppid=int(message.get("ppid", 0)),
            member=member,
            ancestry=[int(p) for p in message.get("ancestry", [])],
            argv=[str(a) for a in message.get("argv", [])],
            hello_t=float(message.get("t", time.monotonic())),
            forked=bool(message.get("forked")),
            dump_path=message.get("dump"),
            started=start_time(pid),
            claimed_pid=claimed if claimed != pid else None,
            native=native,
            lineage=ancestors(pid),  # who may say it reaped it (``senders``)
        )
        connection.pid = pid
        connection.record = record
        barrier = None
        with self._lock:
            previous = self.processes.get(pid)
            if (
                previous is not None
                and not record.forked
                and previous.bye_t is None
                and previous.reaped_t is None
            ):  # the same process, exec'd into another program (a reused pid had ended)
                previous.exec_t = record.hello_t
                previous.ended_t = None
            self.processes[pid] = record
            self.history.append(record)
            # A native process is not held: it cannot wait at the barrier (its hello comes at
            # its first file call, not before its code runs).
            if member and not record.forked and not native and ":" in member:
                group = self._groups.get(member.rsplit(":", 1)[0])
                index = record.member_index
                if group is not None and index is not None:
                    group.arrived.setdefault(index, pid)
                    self._arrival.notify_all()
                    if group.released_t is None:
                        group.held += 1
                        record.held = True
                        barrier = group
            reply = self._hello_reply(barrier, member)
        connection.sock.sendall(reply)

    def _bye(self, connection: Connection, message: dict[str, Any]) -> None:
        """The process is exiting: the status it knows (None if not) and its first uncaught
        exception. A reap of it, earlier or later, wins over the status it said."""
        pid = int(message["pid"])
        code = message.get("code")
        cause = message.get("cause")
        t = float(message["t"])
        with self._lock:  # a descendant's bye on this connection is of its own record
            record = connection.record if pid == connection.pid else self.processes.get(pid)
            if record is None or record.bye_t is not None:
                return
            record.bye_t = t
            record.bye_code = int(code) if code is not None else None
            if cause is not None and record.cause is None:
                record.cause = str(cause)
            if record.bye_code is not None and record.exit_known != "reaped":
                record.exit_code, record.exit_known = record.bye_code, "bye"
            _ended(record, t)
            self._arrival.notify_all()

    def _reaped(self, connection: Connection, message: dict[str, Any]) -> None:
        """A Python parent reaped ``pid``: its exit code (negative: the signal), the truth."""
        pid, code, t = int(message["pid"]), int(message["code"]), float(message["t"])
        with self._lock:
            record = self.processes.get(pid)  # the latest: an exec'd pid ends as its last program
            if record is None:
                self.reaped[pid] = (code, t)
            else:
                record.exit_code, record.exit_known, record.reaped_t = code, "reaped", t
                _ended(record, t)
            self._arrival.notify_all()

    def _member_of(self, pid: int) -> str | None:
        with self._lock:
            record = self.processes.get(pid)
            return record.member if record is not None else None

    def answered_at(self, access: AccessEvent) -> float:
        """When ``access`` (one of ``accesses``) was told to go on: its operation ran then,
        after the report at ``access.t`` and the controller's round trip; ``access.t`` where
        nothing was recorded (the test process's own accesses go on at once)."""
        with self._lock:
            return self._holds.answered_at(access)

    def _ask_listeners(self, ask: Callable[[RuntimeListener], _Answer], what: str) -> list[_Answer]:
        """What each listener answers ``ask``, in order (the caller holds the lock); one that
        raises is a test error (``errors``), and the others are still asked."""
        answers: list[_Answer] = []
        for listener in list(self._listeners):
            try:
                answers.append(ask(listener))
            except Exception as error:
                self._failed(listener, what, error)
        return answers

    def _dispatch(self, event: AccessEvent) -> AccessAnswer | None:
        """Tell every listener; the answer for the process: the first errno any of them asked
        for, else the longest wait, else None (it proceeds)."""
        failure: int | None = None
        wait = 0.0
        look = event.op in LOOK_OPS
        with self._lock:
            if not event.again:
                (self.looks if look else self.accesses).append(event)
            answers = self._ask_listeners(
                lambda listener: (
                    listener.on_access(event) if listener.hears_looks or not look else None
                ),
                f"{event.op} {event.path}",
            )
        for answer in answers:
            if isinstance(answer, AccessAnswer):
                if answer.errno and failure is None:
                    failure = answer.errno
                wait = max(wait, answer.wait)
        if failure is not None:
            return AccessAnswer(errno=failure)
        return AccessAnswer(wait=wait) if wait > 0 else None

    def _probe(self, connection: Connection, message: dict[str, Any]) -> None:
        """A probe's close: ask the listeners (the longest wait any asked for), then reply."""
        pid = int(message["pid"])  # its sender's, or a descendant's (``_handle``)
        event = ProbeEvent(
            pid=pid,
            member=self._member_of(pid),
            host=str(message["host"]),
            port=int(message["port"]),
            t=float(message["t"]),
            again=bool(message.get("again")),
        )
        with self._lock:
            if not event.again:
                self.probes.append(event)
            wait = _longest_wait(
                self._ask_listeners(
                    lambda listener: listener.on_probe(event), f"the probe of port {event.port}"
                )
            )
        connection.sock.sendall(_wait_reply(wait))

    def _lock_call(self, connection: Connection, message: dict[str, Any]) -> None:
        """A lock call that locks nothing: ask the listeners (the longest wait), then reply."""
        pid = int(message["pid"])  # its sender's, or a descendant's (``_handle``)
        event = LockEvent(
            pid=pid,
            member=self._member_of(pid),
            path=str(message["path"]),
            how=str(message["how"]),
            acquire=bool(message["acquire"]),
            exclusive=bool(message.get("exclusive")),
            t=float(message["t"]),
            again=bool(message.get("again")),
        )
        with self._lock:
            wait = _longest_wait(
                self._ask_listeners(
                    lambda listener: listener.on_lock(event), f"the {event.how} of {event.path}"
                )
            )
        connection.sock.sendall(_wait_reply(wait))

    def _local_access(self, op: str, path: str, other: str | None) -> int | None:
        """An access of the test process itself: the errno its call must fail with, or None.
        A "wait" answer is waited out here (the listeners run on this thread, not the
        controller's)."""
        event = AccessEvent(
            pid=os.getpid(),
            member=TEST_PROCESS,
            op=file_op(op),
            path=path,
            t=time.monotonic(),
            tid=threading.get_ident(),
            other=other,
        )
        while True:
            answer = self._dispatch(event)
            if answer is None:
                return None
            if answer.errno:
                return answer.errno
            time.sleep(min(answer.wait, _MAX_LOCAL_WAIT))
            event = replace(event, t=time.monotonic(), again=True)


def _longest_wait(answers: list[float | None]) -> float:
    """The longest wait listeners asked for (seconds; None or 0 asks none), or 0."""
    return max((float(answer) for answer in answers if answer), default=0.0)


def _wait_reply(wait: float) -> bytes:
    return encode({"ok": 1, "wait": wait}) if wait else _OK


def _encode_answer(answer: AccessAnswer | None) -> bytes:
    if answer is None:
        return _OK
    if answer.errno:
        return encode({"ok": 1, "errno": answer.errno})
    return _wait_reply(answer.wait)
