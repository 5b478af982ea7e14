"""What a start-up imports, found by running it once up to where a fork could no longer copy it.

``warm=True`` without ``preload=`` preloads in its template what this probe finds: the member's
own program, run as a cold start would run it (``template.run_program``), with an audit hook that
ends it (``os.stat`` and its kin raise audit events here too: ``child.looks``). What it writes to
the spec's ``result`` file (JSON):

- ``modules``: what was imported before the start-up's first access of a watched folder (the
  cache, the plugin's folders), its first socket bind or connect, fork, exec, thread start or
  sleep, its first change of the environment made by its own code (``os.environ[...] = ...``
  outside any import: a module imported after it may read it, and a template imports with the
  members' environment, not with the one the program made), or its first change of a file
  outside the probe's cache (a pid file the probe made first would fail the member that makes
  it);
- ``later`` (when the spec names a ``clone``: a private copy of the cache the members read,
  where the probe may go on): what the start-up imported after that first access, up to the
  first of the same ends but an access of the clone, or ``LATER_SECONDS``. A forked member pays
  for none of these imports: an HTTP client built on the first download imports some sixty
  modules there.

An import that reads or looks at the cache ends the probe: such a module, imported in a
template, would read the template's empty cache, not the member's. A module whose import was
still running when the probe ended is in neither list: a template that imported it would have
run its import further than the start-up had. What a template preloads is still checked by what
its imports read (``observe.py``, ``equivalence.py``).

Standard library only, with the child runtime's modules the template imports anyway: it runs
before anything of the program is imported.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from pytest_startup_guard.runtime.child import looks
from pytest_startup_guard.runtime.child.audit import as_text, operation_paths
from pytest_startup_guard.runtime.child.footprint import opens_for_writing
from pytest_startup_guard.runtime.protocol import ACCESS_EVENTS, DESCRIPTOR_EVENTS, LOOK_EVENTS

# Audit events the probe stops before: a process, a thread, the network.
STOP_EVENTS = frozenset(
    {
        "socket.bind",
        "socket.connect",
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.system",
        "subprocess.Popen",
        "_thread.start_new_thread",
        "time.sleep",  # Python 3.12+ (``_stop_at_sleep`` before that)
    }
)
# Audit events whose first argument is a path: the probe stops before one under a watched folder.
PATH_EVENTS = ACCESS_EVENTS | {"os.utime"}  # every file operation the runtime reports, and utime
# The file operations that change what they name (an open changes it when it may write).
CHANGING_EVENTS = PATH_EVENTS - {"open", "os.listdir", "os.scandir"} - DESCRIPTOR_EVENTS
ENVIRONMENT_EVENTS = frozenset({"os.putenv", "os.unsetenv"})
# The longest the probe goes on after the first access (a start-up that loads a model reads for
# a while): what it imported by then is what it found.
LATER_SECONDS = 5.0


def module_file(name: str) -> str | None:
    """Where module ``name`` was loaded from (None: built in, or a namespace)."""
    module = sys.modules.get(name)
    found = getattr(module, "__file__", None)
    return os.path.realpath(found) if isinstance(found, str) else None


def importing() -> list[str]:
    """The modules being imported right now, innermost first (the import system's
    ``_find_and_load`` frames on this thread's stack)."""
    names = []
    frame: Any = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_find_and_load" and code.co_filename.startswith("<frozen"):
            name = frame.f_locals.get("name")
            if isinstance(name, str):
                names.append(name)
        frame = frame.f_back
    return names


def imported(before: set[str], running: list[str]) -> list[str]:
    """The modules imported since ``before`` (in import order) whose import has ended: none
    from the first of ``running`` on (``sys.modules`` holds a module from its import's start)."""
    loaded = list(sys.modules)
    unfinished = set(running)
    end = next((i for i, name in enumerate(loaded) if name in unfinished), len(loaded))
    return [name for name in loaded[:end] if name not in before and name != "__main__"]


def _path_of(event: str, args: tuple[Any, ...]) -> str | None:
    """The path an event names, absolute (a lock's: its descriptor's, as the child runtime
    reads it), or None."""
    if event in DESCRIPTOR_EVENTS:
        path, _ = operation_paths(event, args)
    else:
        path = as_text(args[0]) if args else None
    if path is None:
        return None
    return path if path.startswith("/") else os.path.join(os.getcwd(), path)


class _Probe:
    """The audit hook's state: which phase, what was found, where to write it."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.result_path = str(spec["result"])
        self.watched = tuple(str(prefix).rstrip("/") + "/" for prefix in spec["watch"])
        clone = spec.get("clone")
        self.clone = str(clone).rstrip("/") + "/" if clone else None
        self.before = set(sys.modules)
        self.first: list[str] | None = None  # the modules imported before the first access
        self.why_first = ""
        self.done = False
        self.writing = False

    def under(self, path: str, prefixes: tuple[str, ...]) -> bool:
        return (path + "/").startswith(prefixes)

    def write(self, data: dict[str, Any]) -> None:
        """The result, whole: a probe killed meanwhile leaves the last one it wrote."""
        self.writing = True  # its own file operations are not the program's
        modules = [*data["modules"], *data.get("later", [])]
        data["files"] = {name: module_file(name) for name in modules}
        temporary = f"{self.result_path}.{os.getpid()}.tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(descriptor, json.dumps(data).encode())
        os.close(descriptor)
        os.replace(temporary, self.result_path)
        self.writing = False

    def stop(self, why: str) -> None:
        """The end: write what was found and exit at once (nothing of the program runs on)."""
        self.done = True
        found = imported(self.before, importing())
        if self.first is None:
            self.write({"modules": found, "stopped": why})
        else:
            first = set(self.first)
            later = [name for name in found if name not in first]
            self.write(
                {
                    "modules": self.first,
                    "stopped": self.why_first,
                    "later": later,
                    "later_stopped": why,
                }
            )
        os._exit(0)

    def go_on(self, why: str) -> None:
        """The first access of the clone: write what was found so far, then let it run on."""
        self.first = imported(self.before, importing())
        self.why_first = why
        self.write({"modules": self.first, "stopped": why})
        signal.signal(signal.SIGALRM, lambda number, frame: self.stop("later: time over"))
        signal.setitimer(signal.ITIMER_REAL, LATER_SECONDS)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.done or self.writing:
            return
        if event in STOP_EVENTS:
            self.stop(event)
        elif event in ENVIRONMENT_EVENTS:
            if not importing():  # the program's own change, not a module's at its import
                self.stop(f"{event} by the program")
        elif (event in PATH_EVENTS or event in LOOK_EVENTS) and args:
            path = _path_of(event, args)
            if path is not None:
                self._path_event(event, args, path)

    def _path_event(self, event: str, args: tuple[Any, ...], path: str) -> None:
        look = event in LOOK_EVENTS
        in_clone = self.clone is not None and self.under(path, (self.clone,))
        if in_clone or self.under(path, self.watched):
            if importing():  # a module that reads the cache at import: not preloaded
                self.stop(f"{event} {path} by an import")
            elif in_clone and self.first is None and not look:
                self.go_on(f"{event} {path}")
            elif not look and not in_clone:
                self.stop(f"{event} {path}")
            return
        if look:
            return
        changes = event in CHANGING_EVENTS or event in DESCRIPTOR_EVENTS
        if event == "open" and opens_for_writing(args):
            changes = True
        # The program's changes outside its private cache (a pid file, a log) are what the
        # members make: a probe that made one first could fail them. An import's own writes
        # (its cached bytecode) a template's import makes too.
        if changes and not importing():
            self.stop(f"{event} {path}: a change outside the probe's cache")


def probe(
    spec_path: str,
    run_program: Callable[[str, str, list[str]], None],
    path0: Callable[[str, str, str], str],
) -> int:
    """Run the program of ``spec_path`` (JSON: kind, target, args, watch, result, and
    optionally clone) as a cold start would (``sys.path[0]`` from ``path0``) until the probe
    ends it; what it found goes to the result file."""
    with open(spec_path) as handle:
        spec = json.load(handle)
    sys.path[0] = path0(spec["kind"], spec["target"], os.getcwd())
    state = _Probe(spec)
    looks.install()  # os.stat and its kin raise audit events, as in a member
    sys.addaudithook(state.hook)
    _stop_at_sleep(state.stop)
    try:
        run_program(spec["kind"], spec["target"], spec["args"])
    except BaseException as error:  # the program ended before any stop: all it imported
        state.stop(f"the program ended ({type(error).__name__})")
    state.stop("the program ended")
    return 0


def _stop_at_sleep(stop: Callable[[str], None]) -> None:
    """A start-up that sleeps waits (a server idling, a retry's back-off): its imports are
    done. Python 3.12 raises ``time.sleep`` as an audit event; before, the probe wraps it."""
    if sys.version_info >= (3, 12):
        return
    original = time.sleep

    def sleep(seconds: Any) -> None:
        stop("time.sleep")
        original(seconds)

    time.sleep = sleep


__all__ = ["LATER_SECONDS", "STOP_EVENTS", "imported", "importing", "module_file", "probe"]
