"""The child runtime: the part of the plugin that runs inside every Python process of a test.

A process started with ``STARTUP_GUARD_PLAN`` in its environment imports this module from the
``startup_guard_boot.pth`` line before any user code (``boot``). It then:

- registers a stack dump of all its threads on ``DUMP_SIGNAL`` into its own file;
- says hello to the controller in the test process and, if it is a fleet member, waits there
  until the whole fleet is released at once (the start barrier);
- installs an audit hook that reports every open, listdir and scandir under the watched
  folders and waits for the controller's answer before the access proceeds, so that the test
  side can change the cache exactly then (a synchronous trigger);
- when the controller asks for them (a launch with port faults), also reports every
  ``socket.bind`` of an internet address before it happens, and waits while the controller
  answers "wait" (how ``same_port`` lets one member bind before the other);
- when it is exiting with a failure (an uncaught exception, or ``sys.exit`` with a non-zero
  status), freezes the garbage collector after every exit handler of the program has run, so
  that finalization does not trace every object again: a server that imported transformers
  spent about 200 ms of its exit there, longer than it took to fail (``_freeze_failing_exit``).

The test process uses the same hook for its own accesses (``activate_in_process``), with the
controller called directly instead of through the socket.

Built-in modules only (``_socket``, ``_thread``, ``_signal``, ``marshal``, ``select``,
``faulthandler``, ``atexit``, ``gc``): it runs in every process under test before user code, and json, socket,
threading or typing would add tens of milliseconds to each start-up. Every module it needs is
imported up front: an import inside an audit hook nests dozens of events.
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

from pytest_startup_guard.runtime.observation import is_unobserved, set_unobserved
from pytest_startup_guard.runtime.protocol import (
    ACCESS_EVENTS,
    ANCESTRY_ENV,
    MEMBER_ENV,
    PLAN_ENV,
    FrameReader,
    decode,
    decode_plan,
    encode,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any, NoReturn

    AccessSink = Callable[[str, str], None]

# Reported only when the controller asks (``binds`` in its hello reply). Binds are rare: they
# are told apart only where an open's path is not a str, off the path of a common open.
BIND_EVENT = "socket.bind"
# Raised by the interpreter right before it prints an uncaught exception: the process fails.
EXCEPTHOOK_EVENT = "sys.excepthook"
_HOOKED_EVENTS = ACCESS_EVENTS | {BIND_EVENT, EXCEPTHOOK_EVENT}
_MAX_BIND_WAIT = 0.05  # seconds: the longest a single "wait" answer may make a bind sleep

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
                sock.sendall(encode(message))
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
    prefixes: tuple[str, ...] = ()
    sink: AccessSink | None = None
    binds = False  # report socket.bind events (the controller asked for them)
    member: str | None = None
    ancestry: tuple[int, ...] = ()
    dump_file: IO[str] | None = None
    dump_path: str | None = None
    hook_installed = False
    fork_handler_installed = False
    owner_pid = 0  # the pid the in-process sink belongs to
    failing = False  # an uncaught exception or a failing sys.exit: it exits with a failure


_state = _State()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Called for every audited event of the process: the cheapest checks come first.
    if event not in _HOOKED_EVENTS:
        return
    prefixes = _state.prefixes
    if not prefixes or not args:
        _rare_event(event, args)
        return
    path = args[0]
    if type(path) is not str:  # a bind's or the excepthook's first argument ends up here
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        elif isinstance(path, os.PathLike):
            path = os.fspath(path)
            if isinstance(path, bytes):
                path = os.fsdecode(path)
        else:
            _rare_event(event, args)
            return  # a file descriptor, or nothing
    if not path.startswith(prefixes):
        if path.startswith("/"):
            return
        path = os.path.join(os.getcwd(), path)
        if not path.startswith(prefixes):
            return
    if is_unobserved():
        return  # the plugin's own file operations (and the sink's) are not accesses
    sink = _state.sink
    if sink is None:
        return
    set_unobserved(True)
    try:
        sink(event, path)
    except Exception:  # nothing here may ever break the caller's open
        pass
    finally:
        set_unobserved(False)


def _rare_event(event: str, args: tuple[Any, ...]) -> None:
    """A bind (reported when asked) or an uncaught exception (the process fails)."""
    if event == BIND_EVENT:
        if _state.binds:
            _report_bind(args)
    elif event == EXCEPTHOOK_EVENT and _state.plan is not None:
        _state.failing = True


def _client_sink(event: str, path: str) -> None:
    client = _state.client
    if client is not None:
        client.request(
            {
                "op": "access",
                "ev": event,
                "path": path,
                "t": time.monotonic(),
                "pid": os.getpid(),
                "tid": _thread.get_ident(),
            }
        )


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


def _install_hook() -> None:
    if not _state.hook_installed:
        sys.addaudithook(_audit)  # cannot be removed: it stays, and costs a set lookup when idle
        _state.hook_installed = True
    if not _state.fork_handler_installed:
        os.register_at_fork(after_in_child=_after_fork)
        _state.fork_handler_installed = True


def _register_dump(plan: dict[str, Any]) -> None:
    dumps = plan.get("dumps")
    if not dumps:
        return
    path = os.path.join(dumps, f"{os.getpid()}.txt")
    try:
        dump_file = open(path, "w")  # noqa: SIM115 - faulthandler keeps writing to it
        faulthandler.register(DUMP_SIGNAL, file=dump_file, all_threads=True, chain=False)
    except (OSError, ValueError, RuntimeError):
        return
    old, _state.dump_file, _state.dump_path = _state.dump_file, dump_file, path
    if old is not None:
        try:
            old.close()
        except OSError:
            pass


def _hello(forked: bool) -> None:
    plan = _state.plan
    if plan is None:
        return
    try:
        _state.client = _Client(plan)
    except OSError:
        _state.client = None
        return
    reply = _state.client.request(
        {
            "op": "hello",
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "member": _state.member,
            "ancestry": list(_state.ancestry),
            "argv": list(getattr(sys, "orig_argv", sys.argv)),
            "dump": _state.dump_path,
            "forked": forked,
            "t": time.monotonic(),
        },
        timeout=float(plan.get("barrier_timeout", 30.0)) + 5.0,
    )
    if reply is None:
        return
    _state.prefixes = tuple(reply.get("watch", ()))
    _state.binds = bool(reply.get("binds"))
    _state.sink = _client_sink
    fifo = reply.get("barrier")
    if fifo:
        released_at = _wait_at_barrier(fifo, float(plan.get("barrier_timeout", 30.0)))
        _state.client.request({"op": "released", "t": released_at, "noreply": True})


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
    """A forked child is a new process under test: new identity, connection and dump file."""
    set_unobserved(False)
    inherited = _state.client
    _state.client = None
    if inherited is not None:
        inherited.sock = None  # the parent's connection: leave it to the parent
    _state.prefixes, _state.sink, _state.binds = (), None, False
    if _state.plan is None:
        if _state.owner_pid == 0:
            return  # nothing was active in the parent
        # A fork of the test process reports through the socket, like any other child.
        _state.owner_pid = 0
        plan = _load_plan(os.environ.get(PLAN_ENV))
        if plan is None:
            return
        _state.plan = plan
        _state.member = os.environ.get(MEMBER_ENV)
    _set_ancestry((*_state.ancestry, os.getppid()))
    _register_dump(_state.plan)
    _hello(forked=True)


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


def boot() -> None:
    """Entry point of a child process with a plan (called from the .pth line via ``_boot``)."""
    if _state.plan is not None:
        return
    if _is_multiprocessing_helper():
        return
    plan = _load_plan(os.environ.get(PLAN_ENV))
    if plan is None:
        return
    _state.plan = plan
    _state.member = os.environ.get(MEMBER_ENV)
    inherited = os.environ.get(ANCESTRY_ENV, "")
    _set_ancestry(tuple(int(pid) for pid in inherited.split(",") if pid.isdigit()))
    _register_dump(plan)
    _hello(forked=False)
    _install_hook()
    _watch_failing_exit()


def _watch_failing_exit() -> None:
    """Note a failing ``sys.exit``, and freeze the collector at the very end of a failing exit.

    The exit handler is registered before any user code, so it runs after every exit handler
    of the program. ``sys.exit`` is wrapped rather than hooked: no audit event tells its status,
    and console scripts end with ``sys.exit(main())``.
    """
    original = sys.exit

    def exit(status: Any = None) -> NoReturn:
        if status is not None and status != 0:
            _state.failing = True
        original(status)

    exit.__doc__ = original.__doc__
    sys.exit = exit
    atexit.register(_freeze_failing_exit)


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
    _state.prefixes = prefixes
    _install_hook()


def deactivate_in_process() -> None:
    if _state.owner_pid == os.getpid() and _state.plan is None:
        _state.prefixes, _state.sink, _state.owner_pid = (), None, 0


def identity() -> dict[str, Any]:
    """What this process knows about itself under the plan (empty when there is none)."""
    return {
        "pid": os.getpid(),
        "active": _state.plan is not None and _state.client is not None,
        "member": _state.member,
        "ancestry": list(_state.ancestry),
        "watching": list(_state.prefixes),
    }
