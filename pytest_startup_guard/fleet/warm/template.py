"""The warm template: one Python process that imports a server's stack once and forks members.

Run as ``python [FLAGS] -m pytest_startup_guard.fleet.warm.template`` by ``fleet/warm/templates.py``, in
two modes:

- ``--probe SPEC``: run the member's program (``SPEC``, a JSON file) up to where a fork could
  no longer copy it, and write what it imported to the spec's ``result`` file (``probe.py``).
- ``--serve REQUESTS REPLIES``: import the modules named on the command line (one that fails is
  skipped), check that forking is safe (``unsafe_to_fork``: threads, a GPU context, sockets,
  locks), reply ``ready {...}`` or ``refuse {...}`` on the ``REPLIES`` descriptor, then read
  ``fork {...}`` lines on ``REQUESTS``: fork a member per line, reply ``pid PID`` once the member
  leads its own session (or ``error MESSAGE``), and ``exit PID CODE`` once it ended. The loop is
  single-threaded: a SIGCHLD wakes its ``select`` and ``waitpid(-1, WNOHANG)`` reaps.

A forked member becomes what a cold start of its command would be (``_become_member``): its own
session, standard input ``/dev/null``, output to its own file, its working folder, the member's
whole environment in ``os.environ`` and the libraries' cache constants pointed at it
(``cache.env.repoint_libraries``), ``sys.argv`` and ``sys.path[0]`` as the interpreter sets them;
then the child runtime boots as the ``.pth`` line would and the program runs (``run_program``),
ending as the interpreter ends one (``_end_as_interpreter``).

Standard library only before a member is forked, but ``cache.env`` (its constants rewriting) and
the child runtime, imported up front so that no member imports them again.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
import types
from typing import Any

# Up front: what every member needs, imported once (the child runtime boots from it).
import pytest_startup_guard.runtime.child  # noqa: F401
from pytest_startup_guard.cache.env import repoint_libraries
from pytest_startup_guard.fleet.warm.observe import ARGV_ENV, ImportWatch, Observation, draw_again
from pytest_startup_guard.fleet.warm.probe import module_file, probe
from pytest_startup_guard.runtime.protocol import PLAN_ENV

GPU_MAPS = ("libcuda", "libamdhip64", "/dev/nvidia", "/dev/kfd")


# -- the program, as the interpreter would run it ----------------------------------------------


def path0(kind: str, target: str, cwd: str) -> str:
    """``sys.path[0]`` as a cold start sets it: the script's real folder, the working folder for
    ``-m``, ``''`` for ``-c``."""
    if kind == "script":
        return os.path.dirname(os.path.realpath(os.path.join(cwd, target)))
    return cwd if kind == "m" else ""


def run_program(kind: str, target: str, args: list[str]) -> None:
    """Run ``-c CODE``, ``-m MODULE`` or a script as ``__main__``, ``sys.argv`` set."""
    import runpy

    if kind == "c":
        sys.argv = ["-c", *args]
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        exec(compile(target, "<string>", "exec"), main.__dict__)
    elif kind == "m":
        sys.argv = ["-m", *args]  # run_module puts the module's file in sys.argv[0]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [target, *args]
        runpy.run_path(target, run_name="__main__")


def _end_as_interpreter(error: BaseException | None) -> int:
    """The exit status and the output of an interpreter ending with ``error`` (None: the
    program returned): SystemExit's code, or the traceback and 1; then non-daemon threads are
    joined and the exit handlers run (the child runtime says bye from one), as at a real exit."""
    code = 0
    if isinstance(error, SystemExit):
        status = error.code
        if status is None:
            code = 0
        elif isinstance(status, int):
            code = status & 0xFF
        else:
            print(status, file=sys.stderr)
            code = 1
    elif error is not None:
        tb = error.__traceback__
        own = {__file__, getattr(sys.modules.get("runpy"), "__file__", None)}
        while tb is not None and tb.tb_frame.f_code.co_filename in own:
            tb = tb.tb_next  # the template's and runpy's frames: a cold traceback has none
        # The event the interpreter raises before it prints an uncaught exception (the child
        # runtime notes the cause from it), then the hook itself.
        sys.audit("sys.excepthook", sys.excepthook, type(error), error, tb)
        sys.excepthook(type(error), error, tb)
        code = 1
    threading = sys.modules.get("threading")
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        try:
            shutdown()
        except BaseException:
            pass
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return code


# -- the template ----------------------------------------------------------------------------


def preload(names: list[str], watch: ImportWatch) -> tuple[list[str], list[str]]:
    """Import each module, ``watch`` recording what the imports read; those that failed,
    with their error."""
    import importlib

    imported, skipped = [], []
    with watch:
        for name in names:
            try:
                importlib.import_module(name)
                imported.append(name)
            except BaseException as error:  # a module that fails to import is skipped
                skipped.append(f"{name} ({type(error).__name__}: {error})")
    return imported, skipped


def unsafe_to_fork(own_fds: set[int], seen: list[Observation] | None = None) -> list[str]:
    """Why a fork of this process would not be a clean start, one cause per line: threads
    besides this one, a GPU context, sockets and locks its forks would share; a thread or
    socket that ``seen`` (the imports' observations) says a module made is named with it."""
    seen = seen or []
    causes = []
    try:
        tasks = len(os.listdir("/proc/self/task"))
    except OSError:
        tasks = 1
    threading = sys.modules.get("threading")
    names = []
    if threading is not None:
        names = [
            f"{thread.name!r}{' (daemon)' if thread.daemon else ''}"
            + _made_by(seen, "thread", repr(thread.name))
            for thread in threading.enumerate()
            if thread is not threading.main_thread()
        ]
    pool = _openblas_pool()
    tasks -= pool  # OpenBLAS ends its pool before a fork (pthread_atfork) and starts it after
    if tasks > 1 or names:
        native = max(0, tasks - 1 - len(names))
        causes.append(
            f"{tasks - 1 or len(names)} thread(s) besides the main thread are alive after the"
            f" imports: {', '.join(names) or 'none with a Python name'}"
            + (f"; {native} native thread(s) (/proc/self/task)" if native else "")
        )
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            causes.append("a CUDA/ROCm context: torch.cuda.is_initialized() is True")
    except Exception:
        pass
    try:
        with open("/proc/self/maps") as handle:
            mapped = {line.split()[-1] for line in handle if "/" in line}
        gpu = sorted(path for path in mapped if any(mark in path for mark in GPU_MAPS))
        if gpu:
            causes.append(f"a CUDA/ROCm context: {', '.join(gpu[:3])} mapped")
    except OSError:
        pass
    sockets = _sockets(own_fds, seen)
    if sockets:
        causes.append(f"open socket(s) every fork would share: {'; '.join(sockets)}")
    locks = _locks()
    if locks:
        causes.append(f"held lock(s) every fork would share: {'; '.join(locks)}")
    return causes


OPENBLAS_THREADS = (
    "openblas_get_num_threads",
    "openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads",
)


def _openblas_pool() -> int:
    """The threads of OpenBLAS's pool (numpy's BLAS: its size less the calling thread), which
    are fork-safe: OpenBLAS shuts them down before a fork and starts them again after it."""
    try:
        with open("/proc/self/maps") as handle:
            libraries = {line.split()[-1] for line in handle if "openblas" in line}
    except OSError:
        return 0
    if not libraries:
        return 0
    import ctypes

    pool = 0
    for library in libraries:
        try:
            loaded = ctypes.CDLL(library)
        except OSError:
            continue
        for name in OPENBLAS_THREADS:
            count = getattr(loaded, name, None)
            if count is not None:
                pool += max(0, int(count()) - 1)
                break
    return pool


def _made_by(seen: list[Observation], kind: str, what: str) -> str:
    """``, made by module 'M' (file:line) at import`` where an observation says so."""
    for entry in seen:
        if entry["kind"] == kind and entry["what"] == what:
            return f", made by module {entry['module']!r} ({entry['where']}) at its import"
    return ""


def _sockets(own_fds: set[int], seen: list[Observation]) -> list[str]:
    found: list[str] = []
    try:
        descriptors = os.listdir("/proc/self/fd")
    except OSError:
        return found
    inodes: dict[str, str] | None = None  # read only once a socket is found: /proc/self/net
    # lists every socket of the network namespace (a fleet's too), and every fork checks again
    for name in descriptors:
        if not name.isdigit() or int(name) in own_fds:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inode = target[len("socket:[") : -1]
            inodes = _socket_addresses() if inodes is None else inodes
            listed = inodes.get(inode, "")
            where = _socket_ends(int(name), listed.endswith("(listening)")) or listed or target
            found.append(f"fd {name} {where}{_made_by(seen, 'socket', f'fd {name}')}")
    return found


def _socket_ends(descriptor: int, listening: bool) -> str | None:
    """ "tcp 127.0.0.1:8000 (listening)", "udp 127.0.0.1:5140 connected to 127.0.0.1:9", "tcp
    socket, not bound": the socket on ``descriptor``, asked of a duplicate of it."""
    import socket

    try:
        sock = socket.socket(fileno=os.dup(descriptor))
    except OSError:
        return None
    try:
        kind = {socket.SOCK_STREAM: "tcp", socket.SOCK_DGRAM: "udp"}.get(sock.type, "raw")
        if sock.family == socket.AF_UNIX:
            kind = f"unix {kind}"
        ends = []
        for ask in (sock.getsockname, sock.getpeername):
            try:
                address = ask()
            except OSError:
                address = None
            if isinstance(address, tuple):
                address = f"{address[0]}:{address[1]}" if address[1] else None
            ends.append(str(address) if address else None)
        local, peer = ends
        if local is None and peer is None:
            return f"{kind} socket, not bound"
        shown = f"{kind} {local or '(unbound)'}"
        shown += f" connected to {peer}" if peer else ""
        return shown + (" (listening)" if listening else "")
    finally:
        sock.close()


def _socket_addresses() -> dict[str, str]:
    """Socket inode -> "tcp 127.0.0.1:8000 (listening)" from /proc/self/net."""
    addresses = {}
    for kind in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open(f"/proc/self/net/{kind}") as handle:
                lines = handle.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            host, _, port = fields[1].rpartition(":")
            state = " (listening)" if fields[3] == "0A" and kind.startswith("tcp") else ""
            where = _host(host) + f":{int(port, 16)}"
            addresses[fields[9]] = f"{kind} {where}{state}"
    return addresses


def _host(hexadecimal: str) -> str:
    if len(hexadecimal) == 8:
        return ".".join(str(int(hexadecimal[i : i + 2], 16)) for i in (6, 4, 2, 0))
    return f"[{hexadecimal}]"


def _locks() -> list[str]:
    pid = str(os.getpid())
    try:
        with open("/proc/locks") as handle:
            lines = handle.readlines()
    except OSError:
        return []
    held = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[4] == pid:
            held.append(f"{fields[1]} {fields[3]} lock on inode {fields[5]}")
    return held


class _Template:
    def __init__(self, requests: int, replies: int) -> None:
        self.requests = requests
        self.replies = replies
        self.buffer = b""
        self.waiting: list[int] = []  # ready pipes of forked members not yet replied for
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)
        os.set_blocking(self.wake_read, False)

    def say(self, line: str) -> None:
        os.write(self.replies, (line + "\n").encode())

    def serve(self, modules: list[str]) -> int:
        started = time.monotonic()
        before = set(sys.modules)
        template_argv = sys.argv
        sys.argv = json.loads(os.environ.pop(ARGV_ENV, "null")) or list(sys.argv)
        watch = ImportWatch()
        imported, skipped = preload(modules, watch)
        watch.kept_argv(sys.argv)
        sys.argv = template_argv
        own = {0, 1, 2, self.requests, self.replies, self.wake_read, self.wake_write}
        causes = unsafe_to_fork(own, watch.observations)
        loaded = [name for name in sys.modules if name not in before]
        details = {
            "imported": imported,
            "skipped": skipped,
            "seconds": time.monotonic() - started,
            "modules": len(sys.modules),
            "observed": watch.observations,
            "files": {name: module_file(name) for name in loaded},
        }
        if causes:
            self.say("refuse " + json.dumps({**details, "causes": causes}))
            return 0
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda number, frame: None)
        self.say("ready " + json.dumps(details))
        while True:
            readable, _, _ = select.select([self.requests, self.wake_read], [], [])
            if self.wake_read in readable:
                try:
                    os.read(self.wake_read, 512)
                except BlockingIOError:
                    pass
            self.reap()
            if self.requests in readable:
                chunk = os.read(self.requests, 65536)
                if not chunk:
                    return 0  # pytest closed its end: the session is over
                self.buffer += chunk
                lines = []
                while b"\n" in self.buffer:
                    line, self.buffer = self.buffer.split(b"\n", 1)
                    lines.append(line.decode())
                self.handle(lines)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.say(f"exit {pid} {os.waitstatus_to_exitcode(status)}")

    def handle(self, lines: list[str]) -> None:
        """Fork a member per ``fork`` line, one after the other, then reply ``pid PID`` for
        each once it leads its own session: a launch's forks do not wait for one another.
        Forking is checked safe once per batch: between its forks no code runs here."""
        replies: list[str | tuple[int, int]] = []
        causes: list[str] | None = None
        for line in lines:
            command, _, rest = line.partition(" ")
            if command != "fork":
                replies.append(f"error unknown request {command!r}")
                continue
            request = json.loads(rest)
            if causes is None:
                causes = unsafe_to_fork({0, 1, 2, self.requests, self.replies})
            if causes:
                replies.append("error " + json.dumps("; ".join(causes)))
                continue
            ready_read, ready_write = os.pipe()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.close(ready_read)
                self._become_member(request, ready_write)
            os.close(ready_write)
            self.waiting.append(ready_read)
            replies.append((pid, ready_read))
        for reply in replies:
            if isinstance(reply, str):
                self.say(reply)
                continue
            pid, ready_read = reply
            os.read(ready_read, 1)  # the member leads its own session now (or has died)
            os.close(ready_read)
            self.waiting.remove(ready_read)
            self.say(f"pid {pid}")

    def _become_member(self, request: dict[str, Any], ready: int) -> None:
        code = 1
        try:
            os.setsid()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            # The template's own, and the ends it waits on for the members forked before this
            # one in the batch: theirs, not this member's.
            for descriptor in (
                self.requests,
                self.replies,
                self.wake_read,
                self.wake_write,
                *self.waiting,
            ):
                os.close(descriptor)
            null = os.open(os.devnull, os.O_RDONLY)
            output = os.open(request["output"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(null, 0)
            os.dup2(output, 1)
            os.dup2(output, 2)
            os.close(null)
            os.close(output)
            os.write(ready, b"x")
            os.close(ready)
            cwd = request["cwd"]
            os.chdir(cwd)
            template_env = dict(os.environ)
            os.environ.clear()
            os.environ.update(request["env"])
            repoint_libraries(template_env, request["env"])
            draw_again()  # what a cold start draws afresh and the plugin knows how to draw
            sys.orig_argv = list(request["orig_argv"])
            sys.path[0] = path0(request["kind"], request["target"], cwd)
            if PLAN_ENV in os.environ:  # what the .pth line does at a cold start
                __import__("pytest_startup_guard.runtime.boot")
        except BaseException:
            import traceback

            traceback.print_exc()
            os._exit(1)
        error: BaseException | None = None
        try:
            run_program(request["kind"], request["target"], request["args"])
        except BaseException as raised:  # ended as the interpreter would end it
            error = raised
        try:
            code = _end_as_interpreter(error)
        finally:
            os._exit(code)


def main(arguments: list[str]) -> int:
    if arguments[:1] == ["--probe"]:
        return probe(arguments[1], run_program, path0)
    if arguments[:1] == ["--serve"]:
        template = _Template(int(arguments[1]), int(arguments[2]))
        return template.serve(arguments[3:])
    print(
        "usage: python -m pytest_startup_guard.fleet.warm.template --probe SPEC | --serve REQUESTS REPLIES MODULE...",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
