"""What the child runtime tells the test side: its processes, their events, and the listeners
that hear them.

The controller (``controller``) receives these from every process of a test and calls each
subscribed ``RuntimeListener``; races, faults and fleets read them. They live apart from the
controller so that the parts that only hear events do not depend on the server that receives
them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

TEST_PROCESS = "test"  # the member label of accesses made by the test process itself


@dataclass
class ProcessRecord:
    """A process that said hello: who it is and when things happened (monotonic seconds)."""

    pid: int
    ppid: int
    member: str | None
    ancestry: list[int]
    argv: list[str]
    hello_t: float
    forked: bool = False
    dump_path: str | None = None
    held: bool = False
    released_t: float | None = None
    gone_t: float | None = None  # its connection closed: it exited or exec'd
    exit_code: int | None = None  # negative: the signal that ended it; None: not known
    exit_known: str = ""  # where exit_code is from: "reaped" (its parent's wait, the truth,
    # wins), "bye" (the status it said it exits with), or "" (not known)
    cause: str | None = None  # its first uncaught exception: "TypeName: message"
    bye_t: float | None = None  # it said bye: it was exiting
    bye_code: int | None = None  # the status it said it exits with (None: it did not know)
    reaped_t: float | None = None  # its parent reaped it
    ended_t: float | None = None  # the earliest of bye_t, reaped_t and gone_t (not an exec)
    exec_t: float | None = None  # it exec'd: the hello of the program that replaced it
    # When it started (process_identity.start_time), read at its hello: a signal goes to ``pid``
    # only while the pid still has this start time. None: it was gone before it could be read.
    started: int | None = None
    claimed_pid: int | None = None  # the pid its hello named, where the kernel's differs
    # Its ancestors' pids, nearest first, as the kernel told them at its hello: the processes
    # that may say they reaped it (its parent, or a subreaper it was handed to).
    lineage: tuple[int, ...] = ()
    # It said hello from the native interposer (launch(native_accesses=True)), not the Python
    # runtime: a program in C or another native language. It is never held at a start barrier.
    native: bool = False

    @property
    def member_index(self) -> int | None:
        if self.member is None or ":" not in self.member:
            return None
        return int(self.member.rsplit(":", 1)[1])


# What a reported event was: one of the audit events the child runtime reports as an access
# (``protocol.ACCESS_EVENTS``), or the bind of an internet address (path "host:port").
AccessOp = Literal[
    "open",
    "os.listdir",
    "os.scandir",
    "os.rename",
    "os.mkdir",
    "os.rmdir",
    "os.remove",
    "os.symlink",
    "os.link",
    "os.truncate",
    "os.chmod",
    "fcntl.flock",
    "fcntl.lockf",
    "startup_guard.opened",  # right after an open for writing returned (the writer's only)
    "socket.bind",
    # Looks at a path (``protocol.LOOK_EVENTS``): os.path.exists, isfile, realpath... look
    # through them. Heard only by listeners that ask (``RuntimeListener.hears_looks``).
    "os.stat",
    "os.lstat",
    "os.access",
    "os.readlink",
]
BIND_OP: AccessOp = "socket.bind"
# Right after an open for writing returned: reported by the real writer's process only
# (``child.steps``), not an operation users name.
OPENED_OP: AccessOp = "startup_guard.opened"
# Looks at a path: they can meet a race's change, but are no access point, read or change.
LOOK_OPS: tuple[AccessOp, ...] = ("os.stat", "os.lstat", "os.access", "os.readlink")
# The file operations, in the order above: every access but a bind, the writer's "opened" and
# a look.
FILE_OPS: tuple[AccessOp, ...] = tuple(
    op for op in get_args(AccessOp) if op not in (BIND_OP, OPENED_OP, *LOOK_OPS)
)
# The accesses that read what is there: the others change it (or lock it).
READ_OPS: tuple[AccessOp, ...] = ("open", "os.listdir", "os.scandir")


def file_op(name: object) -> AccessOp:
    """The op of an access message, or a ``ValueError`` for one the runtime does not report."""
    for op in (*FILE_OPS, OPENED_OP, *LOOK_OPS):
        if name == op:
            return op
    raise ValueError(f"unknown access op {name!r}; the child runtime reports {', '.join(FILE_OPS)}")


@dataclass(frozen=True)
class AccessEvent:
    """One file operation under a watched folder (``FILE_OPS``), or one bind of an internet
    address (op ``socket.bind``, path ``host:port``), reported before it happened."""

    pid: int
    member: str | None  # "<group>:<index>", TEST_PROCESS, or None for unrelated processes
    op: AccessOp
    path: str
    t: float  # time.monotonic() in the accessing process (one clock for the machine)
    tid: int
    # os.rename: the new name; os.link, os.symlink: what the new name (``path``) points at
    other: str | None = None
    # The process asks again after a listener answered "wait" (``AccessAnswer``): the same
    # access, not a new one (it is not recorded or counted again).
    again: bool = False
    # Only where the process reports them (``ACCESS_SITES_ENV``: an exploration's clean run):
    # the code that made the access (a hash of its call stack's files and lines), and for an
    # open whether it may write.
    site: str | None = None
    writes: bool = False
    # Reported by the native interposer (``launch(native_accesses=True)``): a libc call made by
    # native code. It names no site and does not say whether an open writes.
    native: bool = False

    @property
    def port(self) -> int | None:
        """The port of a ``socket.bind`` event (None for file accesses)."""
        if self.op != BIND_OP:
            return None
        return int(self.path.rsplit(":", 1)[1])

    @property
    def host(self) -> str | None:
        """The address of a ``socket.bind`` event, without brackets (None for file accesses)."""
        if self.op != BIND_OP:
            return None
        return self.path.rsplit(":", 1)[0].removeprefix("[").removesuffix("]")

    def paths(self) -> tuple[str, ...]:
        """The paths the operation touches: ``path``, and a rename's new name."""
        if self.op == "os.rename" and self.other is not None:
            return (self.path, self.other)
        return (self.path,)


@dataclass(frozen=True)
class AccessAnswer:
    """What a listener wants of an access (``RuntimeListener.on_access``): the call fails with
    ``errno``, as the system call would, or the process waits ``wait`` seconds and asks again
    (the controller's thread is never blocked by it)."""

    errno: int | None = None
    wait: float = 0.0


def bind_path(host: str, port: int) -> str:
    """``127.0.0.1:8000``, ``[::1]:8000``: the path of a bind event."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class ProbeEvent:
    """A process closed a TCP socket it had bound to ``host:port`` (once ``report_probes`` was
    called): it may have probed for a free port, which it can bind again any moment now.
    Reported after the close, before the close returns (``runtime/child/ports.py``)."""

    pid: int
    member: str | None  # "<group>:<index>", or None for unrelated processes
    host: str
    port: int
    t: float  # time.monotonic() in the process, right after the close
    again: bool  # it asks again after a "wait": the same probe, not a new one


@dataclass(frozen=True)
class LockEvent:
    """A ``fcntl.flock`` or ``fcntl.lockf`` call on a path whose locks do not exclude (once
    ``fault_locks`` named it for the caller's fleet), before it returns without locking
    (``runtime/child/locks.py``): a take (``acquire``) or a release."""

    pid: int
    member: str | None  # "<group>:<index>", or None for unrelated processes
    path: str  # the locked file, as /proc/self/fd names it
    how: str  # "flock" or "lockf"
    acquire: bool  # False: LOCK_UN
    exclusive: bool  # LOCK_EX (a take), not LOCK_SH
    t: float  # time.monotonic() in the process, at the call
    again: bool  # it asks again after a "wait": the same call, not a new one


AccessListener = Callable[[AccessEvent], None]
ReleaseListener = Callable[[float], None]


class RuntimeListener:
    """What the test side hears from the child runtime: subclass it, override what you need,
    and ``RuntimeController.subscribe`` an instance. Every method runs on the controller's
    thread (``on_release``: the thread that releases a fleet) with the controller's lock held;
    an exception it raises is kept in ``RuntimeController.errors``, never lost."""

    # Whether ``on_access`` also hears looks at a path (``LOOK_OPS``: os.stat and its kin).
    hears_looks: ClassVar[bool] = False

    def on_access(self, event: AccessEvent) -> AccessAnswer | None:
        """A watched access, before it proceeds: the process waits until this returns. An
        ``AccessAnswer`` makes the call fail with an errno, or the process wait and ask again
        (``event.again``); None lets it proceed."""
        return None

    def on_bind(self, event: AccessEvent) -> float | None:
        """A bind of an internet address (once ``report_binds`` was called), before it
        proceeds; a positive number makes the binder wait that many seconds and ask again."""
        return None

    def on_probe(self, event: ProbeEvent) -> float | None:
        """A probe's close (once ``report_probes`` was called), before the close returns; a
        positive number makes the process wait that many seconds and ask again."""
        return None

    def on_lock(self, event: LockEvent) -> float | None:
        """A lock call on a path of ``fault_locks``, before it returns; a positive number
        makes the process wait that many seconds and ask again."""
        return None

    def on_release(self, t: float) -> None:
        """A fleet's start barrier was released at ``t`` (monotonic seconds)."""

    def on_gone(self, pid: int) -> None:
        """A process's connection closed: it exited, or exec'd into another program."""


class AccessCallback(RuntimeListener):
    """``add_listener(fn)``: a plain callable that hears every access."""

    def __init__(self, callback: AccessListener) -> None:
        self.callback = callback

    def on_access(self, event: AccessEvent) -> None:
        self.callback(event)
