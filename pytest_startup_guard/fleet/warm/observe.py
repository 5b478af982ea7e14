"""What a template's imports read that a cold start of each member would read afresh.

A fork copies the template's memory: whatever a preloaded module computed at import from the
process's arguments, its environment, its randomness or the clock is the template's, in every
member. ``ImportWatch`` (entered by ``template.py`` around its imports) records each such read,
with the module whose import made it (the innermost module body on the stack: the import stack)
and the line of that module:

- ``argv``: reads of ``sys.argv`` (a list that notes which items were read: ``sys.argv[0]``, a
  slice such as argparse's ``sys.argv[1:]``, or all of it: a loop, ``len``, ``in``);
- ``env``: reads of ``os.environ`` (``[]``, ``get``, ``os.getenv``, ``in``; a loop or a copy reads
  every variable, ``*``), the value the template saw with it;
- ``random``: per-process randomness drawn: ``os.urandom`` (``uuid.uuid4``, ``secrets``,
  ``random.SystemRandom``), the ``random`` module's functions, a ``random.Random()`` seeded from
  the system, ``uuid.uuid1``;
- ``clock``: the wall clock read by the module's own code (``time.time``, ``time.time_ns``; a
  read inside the standard library, as ``logging`` stamping a record, is not one): a time-based
  id or start time would be the template's;
- ``thread`` and ``socket``: a thread started, a socket made, so that a refusal of the one alive
  after the imports names the module that made it.

Reads outside any module's import (the template's own code) and by the standard library's own
modules at their import (``logging`` notes its start time) are not recorded, nor randomness that
the standard library draws again in each process (``tempfile``'s names, ``random``'s own seed).
``draw_again`` draws, in a forked member, what the plugin knows a library drew at import:
numpy's global generator, transformers' session id (``REDRAWN``). What is seen is what goes
through Python: a read by native code (``getenv`` in C, a C extension's own randomness,
``datetime.now``) is not. Standard library only: it runs in the template before any member is
forked.
"""

from __future__ import annotations

import os
import random
import socket
import sys
import sysconfig
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

# The arguments a template imports under (JSON: ``sys.argv`` as member 0 of the launch that
# started it has it), so that a module reading them at import reads a member's, and is seen.
ARGV_ENV = "STARTUP_GUARD_TEMPLATE_ARGV"
# One observation: {"kind", "module", "where" (file:line), "what"} and, for env, "value".
Observation = dict[str, Any]
ALL = "*"  # every item (argv) or every variable (env) was read

_PATHS = sysconfig.get_paths()
_STDLIB = tuple({os.path.realpath(_PATHS[name]) + os.sep for name in ("stdlib", "platstdlib")})
_INSTALLED = tuple({os.path.realpath(_PATHS[name]) + os.sep for name in ("purelib", "platlib")})
_OWN = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))) + os.sep


def _standard(filename: str) -> bool:
    installed = filename.startswith(_INSTALLED) or "-packages" + os.sep in filename
    return filename.startswith(_STDLIB) and not installed


def _importer(frame: FrameType | None) -> tuple[str, str, list[str]] | None:
    """The module whose import is running (the innermost module body on the stack), its line,
    and the standard library's files between the read and that module's code; None outside
    any import, or for the standard library's and the plugin's own modules."""
    through: list[str] = []
    while frame is not None:
        filename = os.path.realpath(frame.f_code.co_filename)
        if frame.f_code.co_name == "<module>":
            if _standard(filename) or filename.startswith(_OWN):
                return None
            name = str(frame.f_globals.get("__name__", "?"))
            return name, f"{frame.f_code.co_filename}:{frame.f_lineno}", through
        if _standard(filename):
            through.append(os.path.basename(filename))
        frame = frame.f_back
    return None


# Modules of the standard library that draw their randomness again in each process (they note
# the pid they drew it in): a draw through them at import is no per-process value.
_DRAWN_PER_PROCESS = ("tempfile.py",)

# Randomness a library draws at import that ``draw_again`` draws again in a forked member:
# module (or package) -> what is drawn again.
REDRAWN = {
    "numpy.random": "numpy's global generator, seeded again (numpy.random.seed())",
    "transformers.utils.hub": "transformers' SESSION_ID, drawn again (uuid4)",
}


def redrawn(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in REDRAWN)


def draw_again() -> None:
    """In a member just forked: draw what ``REDRAWN`` names afresh, as a cold start would."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    hub = sys.modules.get("transformers.utils.hub")
    if hub is not None and isinstance(getattr(hub, "SESSION_ID", None), str):
        setattr(hub, "SESSION_ID", uuid.uuid4().hex)  # noqa: B010 - a module mypy cannot see


class ImportWatch:
    """Records what the imports between ``__enter__`` and ``__exit__`` read (``observations``)."""

    def __init__(self) -> None:
        self.observations: list[Observation] = []
        self.active = False
        self._seen: set[tuple[str, str, str]] = set()
        self._undo: list[Callable[[], None]] = []

    def note(self, kind: str, what: str, value: str | None = None) -> None:
        """One read of ``kind``, attributed to the module being imported (if any)."""
        if not self.active:
            return
        found = _importer(sys._getframe(2))
        if found is None:
            return
        module, where, through = found
        if kind == "clock" and through:
            return  # the standard library's own use of the clock (a log record's time)
        if kind == "random" and any(name in through for name in _DRAWN_PER_PROCESS):
            return
        if (kind, module, what) in self._seen:
            return
        self._seen.add((kind, module, what))
        entry: Observation = {"kind": kind, "module": module, "where": where, "what": what}
        if value is not None:
            entry["value"] = value
        self.observations.append(entry)

    def __enter__(self) -> ImportWatch:
        self.active = True
        self._watch_argv()
        self._watch_environ()
        self._watch_randomness()
        self._watch_clock()
        self._watch_threads_and_sockets()
        return self

    def __exit__(self, *exc: object) -> None:
        self.active = False
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def kept_argv(self, argv: list[str]) -> None:
        """After the imports: a module that kept ``sys.argv`` itself (``ARGS = sys.argv``)
        keeps the template's list, which it may read any time later."""
        for name, module in list(sys.modules.items()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict) or "__file__" not in namespace:
                continue
            for attribute, value in list(namespace.items()):
                if value is argv and not (module is sys and attribute == "argv"):
                    entry = {"kind": "argv", "module": name, "what": ALL}
                    entry["where"] = f"{namespace['__file__']} ({attribute} = sys.argv)"
                    self.observations.append(entry)

    def _replace(self, owner: Any, name: str, value: Any) -> None:
        original = getattr(owner, name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, original))

    # -- sys.argv ----------------------------------------------------------------------------

    def _watch_argv(self) -> None:
        watch = self

        class Argv(list):  # type: ignore[type-arg]
            """``sys.argv`` during the imports: each read is noted (which items)."""

            def __getitem__(self, index: Any) -> Any:
                if isinstance(index, slice):
                    start, stop, _ = index.indices(len(self))
                    watch.note("argv", f"sys.argv[{start}:]" if stop >= len(self) else ALL)
                else:
                    watch.note("argv", "sys.argv[0]" if index == 0 else ALL)
                return list.__getitem__(self, index)

            def __iter__(self) -> Iterator[Any]:
                watch.note("argv", ALL)
                return list.__iter__(self)

            def __len__(self) -> int:
                watch.note("argv", ALL)
                return list.__len__(self)

            def __contains__(self, item: object) -> bool:
                watch.note("argv", ALL)
                return list.__contains__(self, item)

        original = sys.argv
        sys.argv = Argv(original)
        self._undo.append(lambda: setattr(sys, "argv", original))

    # -- os.environ --------------------------------------------------------------------------

    def _watch_environ(self) -> None:
        watch = self
        environ = os.environ

        class Environ(type(environ)):  # type: ignore[misc]
            """``os.environ`` during the imports, on the same variables: each read is noted."""

            def __getitem__(self, key: str) -> str:
                try:
                    value = super().__getitem__(key)
                except KeyError:
                    watch.note("env", str(key))  # unset: no value
                    raise
                watch.note("env", str(key), value)
                return str(value)

            def __iter__(self) -> Iterator[str]:
                watch.note("env", ALL)
                return iter(list(super().__iter__()))

            def __len__(self) -> int:
                watch.note("env", ALL)
                return int(super().__len__())

            def items(self) -> Any:
                watch.note("env", ALL)  # every variable, none noted by name
                decode_key, decode_value = self.decodekey, self.decodevalue
                return [(decode_key(k), decode_value(v)) for k, v in list(self._data.items())]

            def values(self) -> Any:
                watch.note("env", ALL)
                return [value for _, value in self.items()]

            def copy(self) -> dict[str, str]:
                watch.note("env", ALL)
                return dict(self.items())

        recording = Environ(
            environ._data,  # type: ignore[attr-defined]  # the same variables, not a copy
            environ.encodekey,
            environ.decodekey,
            environ.encodevalue,
            environ.decodevalue,
        )
        self._replace(os, "environ", recording)

    # -- randomness and the clock ------------------------------------------------------------

    def _wrap(self, owner: Any, name: str, kind: str, what: str) -> None:
        """``owner.name`` noting each call as ``kind`` ``what`` while the imports run; put back
        after, though a module that took the function itself (``from os import urandom``)
        keeps the wrapper, which then only calls through."""
        original = getattr(owner, name)
        watch = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            watch.note(kind, what)
            return original(*args, **kwargs)

        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        self._replace(owner, name, wrapper)

    def _watch_randomness(self) -> None:
        self._wrap(os, "urandom", "random", "os.urandom")
        self._wrap(random, "_urandom", "random", "os.urandom (random.SystemRandom, secrets)")
        for name in (
            "random",
            "getrandbits",
            "randbytes",
            "randint",
            "randrange",
            "choice",
            "choices",
            "sample",
            "shuffle",
            "uniform",
            "gauss",
            "normalvariate",
        ):
            self._wrap(random, name, "random", f"random.{name}")
        self._wrap(uuid, "uuid4", "random", "uuid.uuid4")
        self._wrap(uuid, "uuid1", "random", "uuid.uuid1")
        watch = self
        seed = random.Random.seed

        def seeded(generator: random.Random, a: Any = None, version: int = 2) -> None:
            if a is None:
                watch.note("random", "random.Random() seeded from the system")
            seed(generator, a, version)

        self._replace(random.Random, "seed", seeded)

    def _watch_clock(self) -> None:
        self._wrap(time, "time", "clock", "time.time")
        self._wrap(time, "time_ns", "clock", "time.time_ns")

    # -- threads and sockets -----------------------------------------------------------------

    def _watch_threads_and_sockets(self) -> None:
        watch = self
        start = threading.Thread.start

        def started(thread: threading.Thread) -> None:
            watch.note("thread", repr(thread.name))
            start(thread)

        self._replace(threading.Thread, "start", started)
        made = socket.socket.__init__

        def made_socket(sock: socket.socket, *args: Any, **kwargs: Any) -> None:
            made(sock, *args, **kwargs)
            watch.note("socket", f"fd {sock.fileno()}")

        self._replace(socket.socket, "__init__", made_socket)


__all__ = ["ALL", "ARGV_ENV", "REDRAWN", "ImportWatch", "Observation", "draw_again", "redrawn"]
