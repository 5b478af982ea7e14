"""The child runtime: the part of the plugin that runs inside every Python process of a test.

A process started with ``STARTUP_GUARD_PLAN`` in its environment imports this module from the
``startup_guard_boot.pth`` line before any user code (``boot``). It first checks that the plan
is live: its folder is a private folder of this user (not a symlink) and its controller answers
the hello. A stale plan (its test is over, or the folder is not ours) changes nothing: the
process runs exactly as without one, after one line on stderr (``plan_refusal``). Under a live
plan it:

- says hello to the controller in the test process and, if it is a fleet member, waits there
  until the whole fleet is released at once (the start barrier);
- registers a stack dump of all its threads on ``DUMP_SIGNAL`` into its own file;
- installs an audit hook that reports every open, listdir and scandir under the watched
  folders and waits for the controller's answer before the access proceeds, so that the test
  side can change the cache exactly then (a synchronous trigger);
- when the controller asks for them (a launch with port faults), also reports every
  ``socket.bind`` of an internet address before it happens, and waits while the controller
  answers "wait" (how ``same_port`` lets one member bind before the other);
- when the controller asks for them (``port_stolen``), also reports each close of a TCP socket
  it bound to an internet address, a probe for a free port, before the close returns
  (``child_ports``);
- when it is exiting with a failure (an uncaught exception, or ``sys.exit`` with a non-zero
  status), freezes the garbage collector after every exit handler of the program has run, so
  that finalization does not trace every object again: a server that imported transformers
  spent about 200 ms of its exit there, longer than it took to fail (``_freeze_failing_exit``);
- says bye when it exits (after every exit handler of the program, or in ``os._exit``, which
  forked workers end with): the exit status when it knows it and the cause, its first
  uncaught exception (``_watch_exit``);
- tells the controller the exit code of every child it reaps (``os.waitpid`` and its kin are
  wrapped): a supervisor's wait is the truth about a worker, also one killed by a signal;
- when the controller asks for it (``record_footprint``), reports every file it changes and
  every address it reaches (``FOOTPRINT_EVENTS``: ``footprint_of``) without waiting for a reply.

A forked child says hello again under its parent's plan; if that plan's controller is gone by
then, the child quietly undoes what it inherited (``_stand_down``) and runs as without a plan.

The test process uses the same hook for its own accesses (``activate_in_process``), with the
controller called directly instead of through the socket.

Built-in modules only (``_socket``, ``_thread``, ``_signal``, ``marshal``, ``select``,
``faulthandler``, ``atexit``, ``gc``): it runs in every process under test before user code, and
json, socket, threading or typing would add tens of milliseconds to each start-up. Every module
it needs is imported up front: an import inside an audit hook nests dozens of events. What it
wraps of other modules it wraps where they are already loaded (multiprocessing's worker
bootstrap: in a fork, or once a spawned worker has imported it), never by importing them.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal minus its enum import
import _socket
import _thread
import atexit
import faulthandler
import gc
import os
import select
import sys
import time

from pytest_startup_guard.runtime import child_locks, child_ports, child_steps
from pytest_startup_guard.runtime.observation import is_unobserved, set_unobserved
from pytest_startup_guard.runtime.protocol import (
    ACCESS_EVENTS,
    ACCESS_SITES_ENV,
    ANCESTRY_ENV,
    DESCRIPTOR_EVENTS,
    FOOTPRINT_EVENTS,
    MEMBER_ENV,
    OPENED_EVENT,
    PLAN_ENV,
    WRITER_STEPS_ENV,
    FrameReader,
    decode,
    decode_plan,
    encode,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any, NoReturn

    # (event, path, other) -> the errno the call must fail with, or None: it proceeds
    AccessSink = Callable[[str, str, "str | None"], "int | None"]

# Reported only when the controller asks (``binds`` in its hello reply). Binds are rare: they
# are told apart only where an open's path is not a str, off the path of a common open.
BIND_EVENT = "socket.bind"
# Raised by the interpreter right before it prints an uncaught exception: the process fails.
# (A thread's uncaught exception raises no audit event: ``_thread._excepthook`` is wrapped.)
EXCEPTHOOK_EVENT = "sys.excepthook"
# OPENED_EVENT: raised only by a writer's process (child_steps), after an open for writing.
_HOOKED_EVENTS = ACCESS_EVENTS | {BIND_EVENT, EXCEPTHOOK_EVENT, OPENED_EVENT}
# The access events whose path is not simply their first argument (``_operation_paths``).
_TWO_PATH_EVENTS = frozenset({"os.rename", "os.symlink", "os.link"})
_ODD_PATH_EVENTS = _TWO_PATH_EVENTS | DESCRIPTOR_EVENTS
_MAX_ACCESS_WAIT = 0.05  # seconds: the longest a single "wait" answer may make an access sleep
# What the audit hook looks at first: the footprint events join only where they are reported.
_hooked_events: frozenset[str] = _HOOKED_EVENTS
_MAX_BIND_WAIT = 0.05  # seconds: the longest a single "wait" answer may make a bind sleep
_BYE_WAIT = 0.2  # seconds: the longest an exit waits for another thread's message to go first
_NOTICE_TIMEOUT = 1.0  # seconds: the longest a message without reply may take to send
# seconds: the longest a footprint notice waits for another thread's message to go first; past
# that it goes with the process's next message (``_Client.notify``)
_FOOTPRINT_WAIT = 0.2
# The open flags that change a file (an "open" event with none of them is a read).
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# File types of st_mode (the stat module's values, which POSIX fixes), without importing stat.
_S_IFMT, _S_IFDIR, _S_IFSOCK = 0o170000, 0o040000, 0o140000
MAX_CAUSE = 500  # characters of a cause ("TypeName: message") sent in a bye
# The command line of a multiprocessing spawn worker (CPython 3.8-3.14, spawn.get_command_line).
_SPAWN_MAIN = "from multiprocessing.spawn import spawn_main"

# SIGURG's default action is to ignore it: a dump request that reaches a process before it
# registered its handler (or after an exec reset it) can never kill that process.
DUMP_SIGNAL: int = _signal.SIGURG


class _Client:
    """One connection to the controller; request/reply, one at a time (a lock per process)."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.lock = _thread.allocate_lock()
        self.sock: _socket.socket | None = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.sock.settimeout(float(plan.get("reply_timeout", 30.0)))
        self.sock.connect(plan["socket"])
        self.reader = FrameReader()
        self.pending: list[bytes] = []  # notices that found the connection busy (``notify``)

    def _take_pending(self) -> bytes:
        pending, self.pending = self.pending, []
        return b"".join(pending)

    def _receive(self, sock: _socket.socket) -> bytes | None:
        while True:
            frames = self.reader.feed(b"")
            if frames:
                return frames[0]
            chunk = sock.recv(65536)
            if not chunk:
                return None
            frames = self.reader.feed(chunk)
            if frames:
                return frames[0]

    def request(
        self, message: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any] | None:
        """Send and wait for the reply; None (and no more requests) if the controller is gone."""
        with self.lock:
            sock = self.sock
            if sock is None:
                return None
            try:
                if timeout is not None:
                    sock.settimeout(timeout)
                sock.sendall(self._take_pending() + encode(message))
                if message.get("noreply"):
                    return {}
                payload = self._receive(sock)
                if timeout is not None:
                    sock.settimeout(float(self.plan.get("reply_timeout", 30.0)))
                if payload is None:
                    raise ConnectionError("controller closed the connection")
                return decode(payload)
            except (OSError, ValueError, EOFError):
                # The test side is gone or stuck: carry on unobserved rather than hang or fail.
                self.close()
                return None

    def notify(self, message: dict[str, Any], wait: float = 0.0) -> None:
        """Send a message that gets no reply, never waiting for another sender longer than
        ``wait``: a signal handler (a supervisor reaping on SIGCHLD) may run while its own thread
        holds the connection, so a busy connection queues the message for the next one."""
        message["noreply"] = True
        frame = encode(message)
        acquired = self.lock.acquire(True, wait) if wait > 0 else self.lock.acquire(False)
        if not acquired:
            self.pending.append(frame)
            return
        try:
            sock = self.sock
            if sock is None:
                return
            try:
                sock.settimeout(_NOTICE_TIMEOUT)
                sock.sendall(self._take_pending() + frame)
                sock.settimeout(float(self.plan.get("reply_timeout", 30.0)))
            except OSError:
                self.close()
        finally:
            self.lock.release()

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass


class _State:
    plan: dict[str, Any] | None = None
    client: _Client | None = None
    prefixes: tuple[str, ...] = ()  # the watched folders, each ending in /
    folders: frozenset[str] = frozenset()  # the same without the /: a listing of one of them
    sink: AccessSink | None = None
    binds = False  # report socket.bind events (the controller asked for them)
    footprint = False  # report FOOTPRINT_EVENTS (the controller asked for them)
    member: str | None = None
    ancestry: tuple[int, ...] = ()
    dump_file: IO[str] | None = None
    dump_path: str | None = None
    hook_installed = False
    fork_handler_installed = False
    owner_pid = 0  # the pid the in-process sink belongs to
    failing = False  # an uncaught exception or a failing sys.exit: it exits with a failure
    exit_watched = False  # sys.exit, os._exit, the waits and the exit handler are wrapped
    # what _watch_exit replaced: (owner, attribute, original, wrapper), for _stand_down
    wrapped: tuple[tuple[Any, str, Any, Any], ...] = ()
    main_tid = 0  # the thread that runs the program: a sys.exit elsewhere ends only a thread
    exit_status: int | None = None  # the status it is exiting with, where it knows it
    cause: str | None = None  # its first uncaught exception, "TypeName: message"
    said_bye = False
    spawned_worker = False  # a multiprocessing spawn worker whose bootstrap is not wrapped yet
    sites = False  # ACCESS_SITES_ENV: each access report names the code that made it
    open_writes = False  # with sites: whether the open being reported writes


_state = _State()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Called for every audited event of the process: the cheapest checks come first.
    if event not in _hooked_events:
        return
    if _state.footprint and event in FOOTPRINT_EVENTS:
        _note_footprint(event, args)
        if event not in _HOOKED_EVENTS:
            return  # a footprint event only: no access, no bind
    prefixes = _state.prefixes
    if not prefixes or not args:
        _rare_event(event, args)
        return
    other: str | None = None
    if event in _ODD_PATH_EVENTS:
        path, other = _operation_paths(event, args)
        if path is None:
            return
    else:
        path = args[0]
        if type(path) is not str:
            path = _as_text(path)
            if path is None:  # a bind's or the excepthook's first argument ends up here
                _rare_event(event, args)
                return  # a file descriptor, or nothing
    # Inline, not _is_watched: every open of the process passes here (imports included).
    if not path.startswith(prefixes) and path not in _state.folders:
        watched = False
        if not path.startswith("/"):
            path = os.path.join(os.getcwd(), path)
            watched = _is_watched(path, prefixes)
        if not watched:
            if other is None:
                return
            other = _absolute(other)
            if not _is_watched(other, prefixes):
                return  # a rename or link from and to places nobody watches
    if is_unobserved():
        return  # the plugin's own file operations (and the sink's) are not accesses
    sink = _state.sink
    if sink is None:
        return
    failure: int | None = None
    if _state.sites and event == "open":
        _state.open_writes = _opens_for_writing(args)
    set_unobserved(True)
    try:
        failure = sink(event, path, other)
    except Exception:  # nothing here may ever break the caller's operation
        pass
    finally:
        set_unobserved(False)
    if failure:
        # A fault the test asked for: the call fails as the system call would, raised from the
        # audit hook, which aborts the call before it runs.
        raise _os_error(failure, event, args)


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _opens_for_writing(args: tuple[Any, ...]) -> bool:
    """Whether an ``open`` event's call (``path, mode, flags``) may change the file."""
    flags = args[2] if len(args) > 2 else None
    if type(flags) is int:
        return bool(flags & _WRITE_FLAGS)
    mode = args[1] if len(args) > 1 else None
    return type(mode) is str and any(letter in mode for letter in "wax+")


def _site() -> str:
    """The code that made the access being reported: the files and lines of the call stack
    above the audit hook, hashed (the same code in the same process gives the same site). Only
    an exploration's clean run asks for it (``ACCESS_SITES_ENV``)."""
    frame: Any = sys._getframe(1)
    lines = []
    while frame is not None:
        code = frame.f_code
        if code.co_filename != __file__:  # the hook and this sink: the same for every access
            lines.append((code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return "%x" % (hash(tuple(lines)) & 0xFFFFFFFFFFFF)


def _as_text(path: Any) -> str | None:
    """A path argument as text, or None for a descriptor (or anything that is not a path)."""
    if type(path) is str:
        return path
    if isinstance(path, bytes):
        return os.fsdecode(path)
    if isinstance(path, os.PathLike):
        text = os.fspath(path)
        return os.fsdecode(text) if isinstance(text, bytes) else text
    return None


def _is_watched(path: str, prefixes: tuple[str, ...]) -> bool:
    """Under a watched folder, or the folder itself (a listing of it)."""
    return path.startswith(prefixes) or path.rstrip("/") in _state.folders


def _set_watched(prefixes: tuple[str, ...]) -> None:
    _state.prefixes = prefixes
    _state.folders = frozenset(prefix.rstrip("/") for prefix in prefixes)


def _absolute(path: str) -> str:
    return path if path.startswith("/") else os.path.join(os.getcwd(), path)


def _operation_paths(event: str, args: tuple[Any, ...]) -> tuple[str | None, str | None]:
    """(path, other) of an access whose path is not its first argument: a rename's old and new
    name, the new name of a link or symlink and what it points at, a lock's descriptor's path
    (``/proc/self/fd``; None where it cannot be read)."""
    if event in DESCRIPTOR_EVENTS:  # (fd, operation, ...)
        descriptor = args[0]
        if type(descriptor) is not int:
            try:
                descriptor = descriptor.fileno()  # flock accepts any object with fileno()
            except Exception:
                return None, None
        try:
            return os.readlink(f"/proc/self/fd/{descriptor}"), None
        except OSError:
            return None, None
    if len(args) < 2:
        return None, None
    first, second = _as_text(args[0]), _as_text(args[1])
    if event == "os.rename":  # (src, dst, src_dir_fd, dst_dir_fd)
        return first, second
    return second, first  # os.symlink (src, dst, dir_fd), os.link (src, dst, ...)


def _os_error(number: int, event: str, args: tuple[Any, ...]) -> OSError:
    """The error the system call gives: errno, its message and the path(s) as the caller gave
    them (``OSError`` picks its subclass from the errno: ENOENT is a FileNotFoundError)."""
    message = os.strerror(number)
    if event in DESCRIPTOR_EVENTS:
        return OSError(number, message)
    if event in _TWO_PATH_EVENTS and len(args) >= 2:
        return OSError(number, message, args[0], None, args[1])
    return OSError(number, message, args[0])


def _rare_event(event: str, args: tuple[Any, ...]) -> None:
    """A bind (reported when asked) or an uncaught exception (the process fails); in a spawned
    multiprocessing worker, the first events after it loaded multiprocessing (the open of
    its pipe from the parent is one) wrap the bootstrap of its process object."""
    if event == BIND_EVENT:
        if _state.binds:
            _report_bind(args)
        child_ports.bound(args)  # a probe's close is reported when asked (port_stolen)
    elif event == EXCEPTHOOK_EVENT:
        if _state.plan is not None:
            _state.failing = True
            if len(args) >= 3:  # (hook, type, value, traceback)
                _note_uncaught(args[1], args[2], main=True)
    elif _state.spawned_worker:
        _watch_multiprocessing()


def _note_uncaught(exc_type: Any, value: Any, main: bool) -> None:
    """An uncaught exception: the first is the cause; in the main thread it ends the process
    (with status 1, or by SIGINT for a KeyboardInterrupt, as the interpreter does)."""
    if main:
        interrupted = isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt)
        _state.exit_status = -_signal.SIGINT if interrupted else 1
    if _state.cause is None:
        _state.cause = describe_exception(exc_type, value)


def describe_exception(exc_type: Any, value: Any) -> str:
    """``TypeName: message`` on one line, at most ``MAX_CAUSE`` characters."""
    name = getattr(exc_type, "__name__", None) or type(value).__name__
    try:
        message = str(value)
    except Exception:  # a broken __str__ must not break the exit
        message = ""
    line = " ".join(f"{name}: {message}".split()) if message else str(name)
    return line if len(line) <= MAX_CAUSE else line[: MAX_CAUSE - 3] + "..."


def _client_sink(event: str, path: str, other: str | None) -> int | None:
    """Report the access and wait for the controller's answer: the errno the call must fail
    with, or None to go on; a "wait" answer makes it sleep and ask again."""
    client = _state.client
    if client is None:
        return None
    message: dict[str, Any] = {
        "op": "access",
        "ev": event,
        "path": path,
        "other": other,
        "t": time.monotonic(),
        "pid": os.getpid(),
        "tid": _thread.get_ident(),
    }
    if _state.sites:
        message["site"] = _site()
        if event == "open":
            message["writes"] = 1 if _state.open_writes else 0
    while True:
        reply = client.request(message)
        if not reply:
            return None
        failure = reply.get("errno")
        if failure:
            return int(failure)
        wait = reply.get("wait")
        if not wait:
            return None
        time.sleep(min(float(wait), _MAX_ACCESS_WAIT))
        message = {**message, "again": 1, "t": time.monotonic()}


def _report_bind(args: tuple[Any, ...]) -> None:
    """Tell the controller which port this process is about to bind; wait while it says so."""
    if len(args) < 2:
        return
    address = args[1]
    if type(address) is not tuple or len(address) < 2 or type(address[1]) is not int:
        return  # a Unix socket's path, or something that is not an internet address
    client = _state.client
    if client is None or is_unobserved():
        return
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    set_unobserved(True)
    try:
        while True:
            reply = client.request(
                {
                    "op": "bind",
                    "host": str(host),
                    "port": address[1],
                    "t": time.monotonic(),
                    "pid": os.getpid(),
                    "tid": _thread.get_ident(),
                }
            )
            wait = reply.get("wait") if reply else None
            if not wait:
                return
            time.sleep(min(float(wait), _MAX_BIND_WAIT))
    except Exception:  # nothing here may ever break the caller's bind
        pass
    finally:
        set_unobserved(False)


def _note_footprint(event: str, args: tuple[Any, ...]) -> None:
    """Tell the controller what this operation changes or reaches, without waiting for a
    reply: a footprint is recorded, never held."""
    client = _state.client
    if client is None or is_unobserved():
        return
    set_unobserved(True)
    try:
        seen = footprint_of(event, args)
        if seen is not None:
            message = {"op": "footprint", "ev": event, "path": seen[0], "source": seen[1]}
            client.notify(
                {**message, "pid": os.getpid(), "t": time.monotonic()}, wait=_FOOTPRINT_WAIT
            )
    except Exception:  # nothing here may ever break the caller's operation
        pass
    finally:
        set_unobserved(False)


def footprint_of(event: str, args: tuple[Any, ...]) -> tuple[str, str | None] | None:
    """What the audited operation ``event`` (one of ``FOOTPRINT_EVENTS``) changes or reaches:
    ``(path, source)``, or None for an ``open`` that only reads.

    ``path`` is absolute, its folder resolved (a symlink as the last part is itself the thing
    changed, except where the operation follows it: a write, ``chmod``, ``truncate``); a file
    descriptor is named by ``/proc/self/fd`` where there is one (Linux), else ``<fd N>``. For
    ``socket.connect`` it is ``host:port`` (``[host]:port`` for IPv6) or a Unix socket's path
    (``@name`` in the abstract namespace); for ``socket.getaddrinfo`` the name looked up.
    ``source``: for ``os.rename`` the old name (changed too), for ``os.link`` and ``os.symlink``
    what the new name points at (not changed); else None. Arguments as CPython 3.8+ audits
    them (``-1``: no ``dir_fd``)."""
    if event == "open":  # (path, mode, flags)
        if type(args[0]) is int:
            return None  # open(fd): a descriptor opened before, nothing new is reached
        flags = args[2] if len(args) > 2 else None
        if type(flags) is int:
            if not flags & _WRITE_FLAGS:
                return None
        elif not (type(args[1]) is str and any(c in args[1] for c in "wax+")):
            return None
        return _where(args[0], follow=True), None
    if event == "socket.connect":  # (socket, address)
        return _address(args[1]), None
    if event == "socket.getaddrinfo":  # (host, port, family, type, protocol)
        host = args[0]
        if host is None:
            return None
        return (host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)), None
    if event == "os.rename":  # (src, dst, src_dir_fd, dst_dir_fd)
        return _where(args[1], args[3]), _where(args[0], args[2])
    if event == "os.link":  # (src, dst, src_dir_fd, dst_dir_fd)
        return _where(args[1], args[3]), _where(args[0], args[2])
    if event == "os.symlink":  # (src, dst, dir_fd): src is the link's text, as written
        return _where(args[1], args[2]), os.fsdecode(args[0])
    if event == "os.truncate":  # (path or descriptor, length)
        return _where(args[0], follow=True), None
    # os.mkdir (path, mode, dir_fd), os.chmod (path, mode, dir_fd), os.remove and os.rmdir
    # (path, dir_fd)
    return _where(args[0], args[-1], follow=event == "os.chmod"), None


def _where(path: Any, dir_fd: Any = -1, follow: bool = False) -> str:
    """The absolute path an operation on ``path`` (relative to ``dir_fd``) reaches."""
    if type(path) is int:
        return _descriptor_path(path)
    text: str = os.fsdecode(path)
    if not text.startswith("/"):
        base = _descriptor_path(dir_fd) if type(dir_fd) is int and dir_fd >= 0 else os.getcwd()
        text = f"{base}/{text}"
    head, _, last = text.rpartition("/")
    if follow or last in ("", ".", ".."):
        return os.path.realpath(text)
    return os.path.join(os.path.realpath(head or "/"), last)


def _descriptor_path(descriptor: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{descriptor}")
    except OSError:
        return f"<fd {descriptor}>"


def _address(address: Any) -> str:
    """``host:port``, ``[host]:port``, a Unix socket's absolute path, or ``@name``."""
    if type(address) is tuple and len(address) >= 2:
        host = address[0]
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        return f"[{host}]:{address[1]}" if ":" in str(host) else f"{host}:{address[1]}"
    if isinstance(address, (str, bytes)):
        text = os.fsdecode(address)
        return "@" + text[1:] if text.startswith("\0") else _where(text)
    return repr(address)


def _install_hook() -> None:
    if not _state.hook_installed:
        sys.addaudithook(_audit)  # cannot be removed: it stays, and costs a set lookup when idle
        _state.hook_installed = True
    if not _state.fork_handler_installed:
        os.register_at_fork(after_in_child=_after_fork)
        _state.fork_handler_installed = True


def plan_refusal(plan: dict[str, Any]) -> str | None:
    """Why this process must not follow ``plan``, or None when it may.

    A controller makes its plan's folder private (``mkdtemp``: mode 0700) and puts its socket
    there. A folder that is gone, a symlink, another user's or open to other users is not a
    live plan of ours: at best the leftover of a test that is over, at worst a plan someone
    else planted to be told what this process opens. ``os.lstat`` only: no symlink is
    followed, no audit event raised."""
    socket_path = plan.get("socket")
    if type(socket_path) is not str or not socket_path.startswith("/"):
        return f"its socket {socket_path!r} is not an absolute path"
    folder = socket_path.rpartition("/")[0] or "/"
    for path, kind, file_type in ((folder, "folder", _S_IFDIR), (socket_path, "socket", _S_IFSOCK)):
        try:
            info = os.lstat(path)
        except OSError as error:
            return f"its {kind} {path} is gone ({error.strerror})"
        if info.st_mode & _S_IFMT != file_type:
            return f"its {kind} {path} is not a {kind} (a symlink, or another kind of file)"
        if info.st_uid != os.geteuid():
            return (
                f"its {kind} {path} belongs to uid {info.st_uid}, not to this user ({os.geteuid()})"
            )
        if kind == "folder" and info.st_mode & 0o077:
            mode = oct(info.st_mode & 0o777)
            return f"its folder {folder} is open to other users (mode {mode}; a plan's is 0o700)"
    dumps = plan.get("dumps")
    if dumps is not None and (type(dumps) is not str or dumps.rpartition("/")[0] != folder):
        return f"its dumps folder {dumps!r} is not in its folder {folder}"
    return None


def _join(
    plan: dict[str, Any], member: str | None, ancestry: tuple[int, ...], forked: bool
) -> str | None:
    """Say hello under ``plan`` and, once the controller answered, take it on: the state, the
    stack dump, the ancestry in the environment, the start barrier. Returns None then, or why
    the plan is not live, having changed nothing of this process."""
    why_not = plan_refusal(plan)
    if why_not is not None:
        return why_not
    try:
        client = _Client(plan)
    except OSError as error:
        return f"nothing answers at {plan['socket']} ({type(error).__name__})"
    dump = _open_dump(plan)  # in the plan's own private folder: told in the hello
    reply = client.request(
        {
            "op": "hello",
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "member": member,
            "ancestry": list(ancestry),
            "argv": list(getattr(sys, "orig_argv", sys.argv)),
            "dump": dump[1] if dump is not None else None,
            "forked": forked,
            "t": time.monotonic(),
        },
        timeout=float(plan.get("barrier_timeout", 30.0)) + 5.0,
    )
    if reply is None:
        client.close()
        if dump is not None:
            _discard_dump(*dump)
        return f"the controller at {plan['socket']} did not answer"
    _state.plan, _state.client, _state.member = plan, client, member
    _set_ancestry(ancestry)
    if dump is not None:
        _arm_dump(*dump)
    _set_watched(tuple(reply.get("watch", ())))
    _state.binds = bool(reply.get("binds"))
    child_ports.watch(bool(reply.get("probes")), client)
    child_locks.watch(reply.get("locks"), client)  # lock_not_exclusive: locks that do not lock
    _set_footprint(bool(reply.get("footprint")))
    _state.sink = _client_sink
    fifo = reply.get("barrier")
    if fifo:
        released_at = _wait_at_barrier(fifo, float(plan.get("barrier_timeout", 30.0)))
        client.request({"op": "released", "t": released_at, "noreply": True})
    return None


def _open_dump(plan: dict[str, Any]) -> tuple[IO[str], str] | None:
    """This process's stack dump file in the plan's folder, or None (no dumps, or no file)."""
    dumps = plan.get("dumps")
    if not dumps:
        return None
    path = os.path.join(dumps, f"{os.getpid()}.txt")
    try:
        return open(path, "w"), path  # faulthandler keeps writing to it: never closed here
    except OSError:
        return None


def _arm_dump(dump_file: IO[str], path: str) -> None:
    """Dump every thread's stack into ``dump_file`` on ``DUMP_SIGNAL`` (``dump_stacks``)."""
    try:
        faulthandler.register(DUMP_SIGNAL, file=dump_file, all_threads=True, chain=False)
    except (OSError, ValueError, RuntimeError):
        _discard_dump(dump_file, path)
        return
    old, _state.dump_file, _state.dump_path = _state.dump_file, dump_file, path
    if old is not None:  # the parent's, in a forked child
        try:
            old.close()
        except OSError:
            pass


def _discard_dump(dump_file: IO[str], path: str) -> None:
    try:
        dump_file.close()
        os.remove(path)
    except OSError:
        pass


def _set_footprint(on: bool) -> None:
    """Report ``FOOTPRINT_EVENTS`` from now on, or stop: the hook's first check grows only
    where they are reported."""
    global _hooked_events
    _state.footprint = on
    _hooked_events = _HOOKED_EVENTS | FOOTPRINT_EVENTS if on else _HOOKED_EVENTS


def _wait_at_barrier(fifo: str, timeout: float) -> float:
    """Block until the controller writes our byte into the group's FIFO (one write releases the
    whole fleet), or until ``timeout``; return when we left."""
    try:
        descriptor = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return time.monotonic()
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if os.read(descriptor, 1) in (b"x", b""):  # our byte, or the controller is gone
                    break
            except BlockingIOError:
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            select.select([descriptor], [], [], remaining)
        released_at = time.monotonic()
        # Members woken together often outnumber the cores, and the first ones to run would
        # keep them for a whole time slice (~12 ms spread for 8 on 2 cores). Stepping aside for
        # a millisecond lets every member leave the barrier before any runs on (~0.3 ms).
        time.sleep(0.001)
        return released_at
    finally:
        os.close(descriptor)


def _after_fork() -> None:
    """A forked child is a new process under test: new identity, connection and dump file,
    and an exit of its own (no status, cause or bye yet). If its parent's controller is gone by
    now, it runs as without a plan, quietly: one line per fork would flood a pre-forking
    server's output."""
    set_unobserved(False)
    inherited = _state.client
    _state.client = None
    if inherited is not None:
        inherited.sock = None  # the parent's connection: leave it to the parent
    _set_watched(())
    _state.sink, _state.binds = None, False
    _set_footprint(False)
    _state.main_tid, _state.said_bye = _thread.get_ident(), False
    _state.exit_status, _state.cause, _state.failing = None, None, False
    plan, member, of_the_test = _state.plan, _state.member, False
    if plan is None:
        if _state.owner_pid == 0:
            return  # nothing was active in the parent
        # A fork of the test process reports through the socket, like any other child.
        _state.owner_pid, of_the_test = 0, True
        plan = _load_plan(os.environ.get(PLAN_ENV))
        if plan is None:
            return
        member = os.environ.get(MEMBER_ENV)
    if _join(plan, member, (*_state.ancestry, os.getppid()), forked=True) is not None:
        _stand_down()
        return
    if of_the_test:
        _watch_exit()
    if "multiprocessing.process" in sys.modules:  # a fork worker's bootstrap comes next
        _watch_multiprocessing()


def _stand_down() -> None:
    """Undo what this forked child inherited of a plan whose controller is gone: the stack
    dump's signal handler, the wrapped exit and waits, multiprocessing's wrapped bootstrap.
    (The audit hook cannot be removed: it stays, with nothing to report to, at the cost of a
    set lookup per event.)"""
    _state.plan, _state.member, _state.ancestry = None, None, ()
    _state.spawned_worker = False
    base = getattr(sys.modules.get("multiprocessing.process"), "BaseProcess", None)
    bootstrap = getattr(base, "_bootstrap", None)
    if getattr(bootstrap, "startup_guard", False):
        base._bootstrap = bootstrap.__wrapped__  # type: ignore[union-attr]
    if _state.dump_file is not None:
        faulthandler.unregister(DUMP_SIGNAL)
        try:
            _state.dump_file.close()  # this process's copy of the parent's descriptor
        except OSError:
            pass
        _state.dump_file, _state.dump_path = None, None
    _unwatch_exit()


def _set_ancestry(ancestors: tuple[int, ...]) -> None:
    _state.ancestry = ancestors
    os.environ[ANCESTRY_ENV] = ",".join(str(pid) for pid in (*ancestors, os.getpid()))


def _load_plan(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    plan = decode_plan(raw)
    if plan is None:
        sys.stderr.write(f"startup-guard: ignoring malformed {PLAN_ENV}\n")
    return plan


def _is_multiprocessing_helper() -> bool:
    """multiprocessing's resource tracker is plumbing, never a process under test."""
    argv = getattr(sys, "orig_argv", sys.argv)
    return any("resource_tracker import main" in arg or "semaphore_tracker" in arg for arg in argv)


def _is_spawned_worker() -> bool:
    return any(_SPAWN_MAIN in arg for arg in getattr(sys, "orig_argv", sys.argv))


def boot() -> None:
    """Entry point of a child process with a plan (called from the .pth line via ``boot.py``).

    A plan that is not live (``plan_refusal``, or a controller that does not answer) is
    ignored with one line on stderr: nothing is installed, wrapped or registered."""
    if _state.plan is not None:
        return
    if _is_multiprocessing_helper():
        return
    plan = _load_plan(os.environ.get(PLAN_ENV))
    if plan is None:
        return
    inherited = os.environ.get(ANCESTRY_ENV, "")
    ancestry = tuple(int(pid) for pid in inherited.split(",") if pid.isdigit())
    why_not = _join(plan, os.environ.get(MEMBER_ENV), ancestry, forked=False)
    if why_not is not None:
        sys.stderr.write(
            f"startup-guard: ignoring {PLAN_ENV}, running without the child runtime: {why_not}\n"
        )
        return
    _state.spawned_worker = _is_spawned_worker()
    _state.sites = os.environ.get(ACCESS_SITES_ENV) == "1"
    _install_hook()
    _watch_exit()
    if os.environ.get(WRITER_STEPS_ENV) == "1":  # the real writer: a pause after each open
        child_steps.install()


def _watch_exit() -> None:
    """Learn how this process ends and tell the controller; see its children's ends.

    - ``sys.exit`` is wrapped rather than hooked (no audit event tells its status, and console
      scripts end with ``sys.exit(main())``): the status of the main thread's last call is the
      exit status (a ``raise SystemExit(3)`` of its own is not seen: the status stays unknown);
      a failing one also freezes the collector at the very end (``_freeze_failing_exit``);
    - the exit handler is registered before any user code, so it runs after every exit handler
      of the program: it says bye (``_say_bye``); ``os._exit``, which skips the exit handlers
      (multiprocessing's fork workers end with it), says bye with its status first;
    - ``_thread._excepthook``, what ``threading.excepthook`` is once threading is imported,
      notes the cause of a thread's uncaught exception (no audit event tells it);
    - ``os.waitpid``, ``os.wait``, ``os.wait3``, ``os.wait4`` and ``os.waitid`` report each child
      they reap (``_report_reaped``); what they return or raise is unchanged.
    """
    if _state.exit_watched:
        return
    _state.exit_watched = True
    _state.wrapped = ()
    _state.main_tid = _thread.get_ident()
    original_exit = sys.exit

    def exit(status: Any = None) -> NoReturn:
        if _thread.get_ident() == _state.main_tid:
            _state.exit_status = exit_status_of(status)
        if status is not None and status != 0:
            _state.failing = True
        original_exit(status)

    exit.__doc__ = original_exit.__doc__
    _wrap(sys, "exit", exit)

    original_os_exit = os._exit

    def _exit(status: int) -> NoReturn:
        if type(status) is int:
            _say_bye(status & 0xFF)
        original_os_exit(status)

    _exit.__doc__ = original_os_exit.__doc__
    _wrap(os, "_exit", _exit)
    for name in ("waitpid", "wait", "wait3", "wait4"):
        wait = getattr(os, name, None)
        if wait is not None:
            _wrap(os, name, _reporting(wait))
    waitid = getattr(os, "waitid", None)
    if waitid is not None:
        _wrap(os, "waitid", _reporting_waitid(waitid))
    thread_hook = getattr(_thread, "_excepthook", None)
    if thread_hook is not None:
        _wrap(_thread, "_excepthook", _noting_thread_failures(thread_hook))
    atexit.register(_at_exit)


def _wrap(owner: Any, name: str, wrapper: Any) -> None:
    _state.wrapped += ((owner, name, getattr(owner, name), wrapper),)
    setattr(owner, name, wrapper)


def _unwatch_exit() -> None:
    """Put back what ``_watch_exit`` wrapped, where the program has not replaced it since
    (``threading.excepthook`` too: a copy of ``_thread._excepthook`` once threading loaded)."""
    if not _state.exit_watched:
        return
    _state.exit_watched = False
    threading = sys.modules.get("threading")
    for owner, name, original, wrapper in reversed(_state.wrapped):
        if getattr(owner, name, None) is wrapper:
            setattr(owner, name, original)
        if name == "_excepthook" and getattr(threading, "excepthook", None) is wrapper:
            threading.excepthook = original  # type: ignore[union-attr]
    _state.wrapped = ()
    atexit.unregister(_at_exit)


def exit_status_of(status: Any) -> int:
    """The status a process exits with after ``sys.exit(status)``."""
    if status is None:
        return 0
    if isinstance(status, int):
        return status & 0xFF
    return 1  # an object: printed, and the process fails


def _at_exit() -> None:
    _say_bye(_state.exit_status)
    _freeze_failing_exit()


def _say_bye(code: int | None) -> None:
    """Tell the controller this process is ending, once: ``code`` and its first uncaught
    exception. Never raises, and waits at most ``_BYE_WAIT`` for another thread's message."""
    client = _state.client
    if _state.said_bye or client is None:
        return
    _state.said_bye = True
    try:
        message = {"op": "bye", "pid": os.getpid(), "t": time.monotonic()}
        client.notify({**message, "code": code, "cause": _state.cause}, wait=_BYE_WAIT)
    except Exception:  # nothing here may ever break an exit
        pass


def _reporting(wait: Callable[..., Any]) -> Callable[..., Any]:
    """``os.waitpid`` and its kin (their results start with ``(pid, status)``), reporting."""

    def reporting_wait(*args: Any, **kwargs: Any) -> Any:
        result = wait(*args, **kwargs)
        try:
            _report_reaped(result[0], os.waitstatus_to_exitcode(result[1]))
        except Exception:  # nothing was reaped (pid 0), a stopped child, or no controller
            pass
        return result

    reporting_wait.__name__ = reporting_wait.__qualname__ = wait.__name__
    reporting_wait.__doc__ = wait.__doc__
    return reporting_wait


def _reporting_waitid(waitid: Callable[..., Any]) -> Callable[..., Any]:
    """``os.waitid``, reporting: only an exit or a kill, and not with ``WNOWAIT`` (no reap)."""

    def reporting_waitid(*args: Any, **kwargs: Any) -> Any:
        result = waitid(*args, **kwargs)
        try:
            options = args[2] if len(args) > 2 else kwargs.get("options", 0)
            if result is not None and not options & os.WNOWAIT:
                if result.si_code == os.CLD_EXITED:
                    _report_reaped(result.si_pid, result.si_status)
                elif result.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
                    _report_reaped(result.si_pid, -result.si_status)
        except Exception:
            pass
        return result

    reporting_waitid.__name__ = reporting_waitid.__qualname__ = waitid.__name__
    reporting_waitid.__doc__ = waitid.__doc__
    return reporting_waitid


def _report_reaped(pid: int, code: int) -> None:
    """This process reaped child ``pid``: it exited with ``code`` (negative: that signal)."""
    client = _state.client
    if pid > 0 and client is not None:
        message = {"op": "reaped", "pid": pid, "code": code, "t": time.monotonic()}
        client.notify({**message, "by": os.getpid()})


def _noting_thread_failures(hook: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def _excepthook(args: Any, /) -> Any:
        try:
            if not issubclass(args.exc_type, SystemExit):  # the hook ignores those too
                _note_uncaught(args.exc_type, args.exc_value, main=False)
        except Exception:
            pass
        return hook(args)

    _excepthook.__doc__ = hook.__doc__
    return _excepthook


def _watch_multiprocessing() -> None:
    """Note the exception that ends a multiprocessing worker as its cause.

    ``BaseProcess._bootstrap`` catches what the target raises, prints it and returns 1: no
    hook sees it. Its ``run`` is wrapped, on the worker's own process object, to note the
    exception on its way there. Called where ``multiprocessing.process`` is already loaded (a
    fork; in a spawned worker, once it loaded it), never importing it.
    """
    module = sys.modules.get("multiprocessing.process")
    base = getattr(module, "BaseProcess", None)
    if base is None:
        return  # not loaded yet, or still loading
    _state.spawned_worker = False
    bootstrap = base.__dict__.get("_bootstrap")
    if bootstrap is None or getattr(bootstrap, "startup_guard", False):
        return

    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            run = self.run

            def run_noting_its_failure() -> Any:
                try:
                    return run()
                except Exception as error:  # what _bootstrap catches: the worker fails
                    if _state.cause is None:
                        _state.cause = describe_exception(type(error), error)
                    raise

            self.run = run_noting_its_failure
        except Exception:
            pass
        return bootstrap(self, *args, **kwargs)

    _bootstrap.startup_guard = True  # type: ignore[attr-defined]
    _bootstrap.__wrapped__ = bootstrap  # type: ignore[attr-defined]  # for _stand_down
    _bootstrap.__doc__ = bootstrap.__doc__
    base._bootstrap = _bootstrap


def _freeze_failing_exit() -> None:
    """In a process exiting with a failure, leave every object to reference counting.

    Finalization runs the cycle collector over every module's objects several times: about
    200 ms after ``import transformers`` on this project's CI machine, 20 ms frozen, and a
    caught race ends when its first server has exited. The exit code is decided by then. What
    changes: objects that only module globals keep alive are finalized when their module is
    cleared, later, where their ``__del__`` may find other globals already set to None (as
    Python's documentation warns it may at any exit). A process that exits cleanly is left as it
    is.
    """
    if _state.failing:
        gc.freeze()


# -- the test process ------------------------------------------------------------------------


def activate_in_process(prefixes: tuple[str, ...], sink: AccessSink) -> None:
    """Watch the test process's own accesses: ``sink(event, path)`` runs before each one."""
    _state.owner_pid = os.getpid()
    _state.sink = sink
    _set_watched(prefixes)
    _install_hook()


def deactivate_in_process() -> None:
    if _state.owner_pid == os.getpid() and _state.plan is None:
        _set_watched(())
        _state.sink, _state.owner_pid = None, 0


def identity() -> dict[str, Any]:
    """What this process knows about itself under the plan (empty when there is none)."""
    return {
        "pid": os.getpid(),
        "active": _state.plan is not None and _state.client is not None,
        "member": _state.member,
        "ancestry": list(_state.ancestry),
        "watching": list(_state.prefixes),
        "installed": [
            name
            for name, done in (
                ("audit hook", _state.hook_installed),
                ("exit watch", _state.exit_watched),
                ("stack dump", _state.dump_file is not None),
            )
            if done
        ],
    }
