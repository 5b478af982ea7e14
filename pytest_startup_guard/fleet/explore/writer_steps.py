"""The real writer's steps, and running its process under the child runtime.

A step is one file operation of the writer under the watched cache, as the child runtime reports
it: before the call, so a writer held at its step k+1 shows every other process the state after
its step k (and after what it wrote through descriptors since). Its process also reports
``startup_guard.opened`` right after an open for writing returned (``runtime/child/steps.py``):
without it, the state between ``open(ref, "w")`` (truncated) and the write would never be shown.

``WriterRun`` starts one writer process (a new session, its output in a file, the member label
``WRITER_GROUP:0`` so that its children count as the writer too) and ends its whole tree.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Protocol, cast

from pytest_startup_guard.cache.hubcache import FakeHubCache
from pytest_startup_guard.checks import shown, texts, whole_number
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError, StartupGuardError
from pytest_startup_guard.runtime.controller import (
    RuntimeController,
)
from pytest_startup_guard.runtime.events import (
    READ_OPS,
    AccessAnswer,
    AccessEvent,
    RuntimeListener,
)
from pytest_startup_guard.runtime.observation import unobserved
from pytest_startup_guard.runtime.process_group import end_group
from pytest_startup_guard.runtime.process_identity import signal_process
from pytest_startup_guard.runtime.protocol import (
    MEMBER_ENV,
    OPENED_EVENT,
    RUN_ENV,
    WRITER_STEPS_ENV,
)
from pytest_startup_guard.runtime.run_marker import new_tree

WRITER_GROUP = "startup-guard-writer"
WRITER_MEMBER = f"{WRITER_GROUP}:0"
# What a step that reads shows is the state the step before it left: it is explored once, with
# that step (an open is reported before the call: an open for writing shows its change at the
# ``startup_guard.opened`` right after it).
READ_ONLY_OPS = frozenset(READ_OPS)
# Names Python's tempfile draws (``tmp`` and 8 letters, digits or _), and the random parts
# huggingface_hub puts in temporary names (``main.1a2b3c4d.tmp``, ``x.1a2b3c4d.incomplete``,
# ``tmp_<uuid4>``), and what Linux names a locked descriptor whose file was removed
# (``#2146811 (deleted)``): not a step's identity.
_RANDOM_PARTS = re.compile(
    r"tmp_[0-9a-f-]{36}|tmp[a-z0-9_]{8}|(?<=\.)[0-9a-f]{8}(?=\.(?:tmp|incomplete)\b)"
    r"|#\d+ \(deleted\)$"
)
_OUTPUT_TAIL = 4000  # characters of the writer's output kept for a message


class Writer(Protocol):
    """What ``server_fleet.explore_writer`` needs of a writer (``WriterCommand``)."""

    @property
    def argv(self) -> Sequence[str]: ...

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def cache(self) -> FakeHubCache: ...

    @property
    def label(self) -> str: ...

    @property
    def template_argv(self) -> Sequence[str] | None:
        """A template of the writer that forks one writer per ``run OUTPUT`` line on its
        standard input (``remote/writer.py``), or None: each run starts ``argv``."""
        ...


@dataclass(frozen=True)
class PlainWriter:
    """A user's own writer command: ``argv`` with the test process's environment (where the
    ``hub_remote`` fixture has put the remote's), writing ``cache``."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cache: FakeHubCache
    label: str
    template_argv: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WriterStep:
    """The writer's ``number``th file operation of a clean run: ``op`` (the audit event) on
    ``path`` (and ``other``: a rename's new name, a link's target), relative to the cache's hub
    folder. ``changes``: the state after it may differ from the state after the step before
    (a step that only reads does not: its pairs are those of the step before)."""

    number: int
    op: str
    path: str
    other: str | None = None
    changes: bool = True

    def describe(self) -> str:
        """``3 rename blobs/ab12.incomplete -> blobs/ab12``."""
        name = {OPENED_EVENT: "opened"}.get(self.op, self.op.removeprefix("os."))
        where = f"{self.path} -> {self.other}" if self.other else self.path
        return f"{self.number} {name} {where}"

    def identity(self) -> tuple[str, str | None, str | None]:
        """What must be the same in every run: the op and paths, random names aside."""
        return (self.op, _normalized(self.path), _normalized(self.other))


def _normalized(path: str | None) -> str | None:
    return None if path is None else _RANDOM_PARTS.sub("*", path)


def steps_of(accesses: Sequence[AccessEvent], hub_dir: Path) -> list[WriterStep]:
    """The writer's accesses under ``hub_dir`` as numbered steps."""
    prefix = str(hub_dir).rstrip(os.sep) + os.sep
    steps: list[WriterStep] = []
    for access in accesses:
        if not access.path.startswith(prefix):
            continue
        other = access.other
        if other is not None and other.startswith(prefix):
            other = other[len(prefix) :]
        steps.append(
            WriterStep(
                len(steps) + 1,
                access.op,
                access.path[len(prefix) :],
                other,
                changes=access.op not in READ_ONLY_OPS,
            )
        )
    # An open for writing (an "opened" of the same path follows it) creates or truncates: the
    # state after it, shown at that "opened", is a state of its own.
    for index, step in enumerate(steps[:-1]):
        after = steps[index + 1]
        if step.op == "open" and after.op == OPENED_EVENT and after.path == step.path:
            steps[index] = replace(step, changes=True)
    return steps


LOCK_OPS = frozenset({"fcntl.flock", "fcntl.lockf"})
_HASHED = 1 << 20  # bytes of a file read for its state; a bigger one counts by size and time


def cache_state(hub_dir: Path) -> tuple[tuple[object, ...], ...]:
    """What a reader can see under ``hub_dir``: every entry's path (random names aside), kind,
    link target, and a file's size and content (the plugin's own look: unobserved)."""
    entries: list[tuple[object, ...]] = []
    with unobserved():
        for folder, folders, files in os.walk(hub_dir):
            for name in sorted(folders + files):
                path = os.path.join(folder, name)
                relative = _normalized(os.path.relpath(path, hub_dir))
                try:
                    if os.path.islink(path):
                        entries.append((relative, "link", _normalized(os.readlink(path))))
                    elif os.path.isdir(path):
                        entries.append((relative, "dir"))
                    else:
                        info = os.stat(path)
                        if info.st_size <= _HASHED:
                            with open(path, "rb") as handle:
                                digest = hashlib.sha1(handle.read()).hexdigest()
                        else:
                            digest = str(info.st_mtime_ns)
                        entries.append((relative, "file", info.st_size, digest))
                except OSError:  # removed while we looked: the writer runs on
                    entries.append((relative, "gone"))
    return tuple(sorted(entries, key=lambda entry: str(entry[0])))


class StateRecorder(RuntimeListener):
    """Hears a clean run of the writer: the cache's state before each of its steps (the state
    after the step before it), for telling the steps that change what readers see."""

    def __init__(self, hub_dir: Path) -> None:
        self.hub_dir = hub_dir
        self.prefix = str(hub_dir).rstrip(os.sep) + os.sep
        self.states: list[tuple[tuple[object, ...], ...]] = []

    def on_access(self, event: AccessEvent) -> AccessAnswer | None:
        if event.member == WRITER_MEMBER and not event.again and event.path.startswith(self.prefix):
            self.states.append(cache_state(self.hub_dir))
        return None

    def changes(self, steps: list[WriterStep]) -> list[WriterStep]:
        """``steps`` with ``changes`` set: the state after a step differs from the state
        before it, or the step takes or releases a lock (which no listing shows). Call once
        the writer ended."""
        states = [*self.states, cache_state(self.hub_dir)]
        if len(states) != len(steps) + 1:
            return steps
        return [
            replace(step, changes=step.op in LOCK_OPS or states[index + 1] != states[index])
            for index, step in enumerate(steps)
        ]


def writer_accesses(controller: RuntimeController, before: int) -> list[AccessEvent]:
    """The writer's accesses the controller heard since ``before`` (its count of accesses)."""
    with controller.lock:
        return [a for a in controller.accesses[before:] if a.member == WRITER_MEMBER]


def checked_writer(writer: object, cache: FakeHubCache | None, where: str) -> Writer:
    """``writer`` as ``explore_writer`` runs it: a ``WriterCommand`` (``hub_remote.writer``), or
    a plain argv of the user's own writer, which writes ``cache``."""
    if all(hasattr(writer, name) for name in ("argv", "env", "cache", "label")):
        return cast(Writer, writer)
    if isinstance(writer, (str, bytes)) or not isinstance(writer, Sequence) or not writer:
        raise ArgumentTypeError(
            f"invalid writer={shown(writer)} for {where}: expected hub_remote.writer(repo_id, ...)"
            " or the argv of your own writer, a non-empty list of str such as"
            " [sys.executable, 'refresh.py']"
        )
    argv = tuple(texts("writer", writer, where, meaning="the writer's command line", empty=False))
    program = argv[0]
    found = shutil.which(program) if os.sep not in program else program
    if found is None or not os.access(found, os.X_OK) or os.path.isdir(found):
        raise InvalidArgumentError(
            f"invalid writer={shown(list(argv))} for {where}: {program!r} is not a program"
            " that can be run (not on PATH, missing, or not executable)"
        )
    if cache is None:
        raise InvalidArgumentError(
            f"invalid writer={shown(list(argv))} for {where}: a writer given as a plain argv"
            " needs the cache it writes: pass cache=hub_remote.cache, or use the hub_cache"
            " fixture"
        )
    return PlainWriter(argv, {}, cache, command_label(argv))


def command_label(argv: Sequence[str]) -> str:
    """A command line on one short line: each long or multi-line argument cut."""
    shown_parts = []
    for part in argv:
        first = part.strip().splitlines()[0] if part.strip() else part
        cut = first if len(first) <= 40 and first == part.strip() else first[:37] + "..."
        shown_parts.append(cut)
    return " ".join(shown_parts)


def checked_pairs(pairs: object, where: str) -> list[tuple[int, int]] | None:
    """``pairs=[(step, point), ...]``, each number from 1."""
    if pairs is None:
        return None
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence) or not pairs:
        raise ArgumentTypeError(
            f"invalid pairs={shown(pairs)} for {where}: expected a non-empty list of"
            " (step, point) tuples, such as [(3, 1)]"
        )
    checked = []
    for position, pair in enumerate(pairs):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ArgumentTypeError(
                f"invalid pairs[{position}]={shown(pair)} for {where}: expected a (step, point)"
                " tuple, such as (3, 1)"
            )
        step = whole_number(f"pairs[{position}][0] (step)", pair[0], where, minimum=1)
        point = whole_number(f"pairs[{position}][1] (point)", pair[1], where, minimum=1)
        checked.append((step, point))
    return checked


def checked_points(points: object, where: str) -> list[int] | None:
    """``points=[j, ...]``, each from 1."""
    if points is None:
        return None
    if isinstance(points, (str, bytes)) or not isinstance(points, Sequence) or not points:
        raise ArgumentTypeError(
            f"invalid points={shown(points)} for {where}: expected a non-empty list of the"
            " readers' access points, numbers from 1, such as [1, 2]"
        )
    return [
        whole_number(f"points[{position}]", point, where, minimum=1)
        for position, point in enumerate(points)
    ]


def writer_env(writer: Writer, controller: RuntimeController, marker: str) -> dict[str, str]:
    """The writer's environment: the test process's, the writer's, the plan; its member label
    (its children count as the writer too) and the pause after each open for writing."""
    return {
        **os.environ,
        **writer.env,
        **controller.env,
        MEMBER_ENV: WRITER_MEMBER,
        WRITER_STEPS_ENV: "1",
        RUN_ENV: marker,
    }


class WriterRun:
    """One run of the writer's process: started at once, ended (its whole tree) by ``end``."""

    def __init__(
        self, writer: Writer, controller: RuntimeController, folder: Path, number: int
    ) -> None:
        self.output_path = folder / f"writer-{number}.log"
        self.controller = controller
        self._output: IO[str] = open(self.output_path, "w")  # noqa: SIM115 - closed in end()
        self.marker = new_tree()
        self.process = subprocess.Popen(
            list(writer.argv),
            env=writer_env(writer, controller, self.marker),
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def ended(self) -> bool:
        """It exited (or, as the child runtime heard, is exiting)."""
        if self.process.poll() is not None:
            return True
        record = self.controller.processes.get(self.pid)
        return record is not None and record.ended_t is not None

    def wait(self, timeout: float) -> int | None:
        """Its exit code, waiting up to ``timeout`` seconds; None: it still runs."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def end(self) -> None:
        """End its tree (what still runs) and reap it."""
        end_group(self.process, 0.0, self.marker)
        self.process.wait()
        self._output.close()

    def output(self) -> str:
        """The end of what it printed."""
        try:
            text = self.output_path.read_text(errors="replace")
        except OSError:
            return ""
        return text[-_OUTPUT_TAIL:]

    def cause(self) -> str | None:
        """Its first uncaught exception, as the child runtime heard it at its exit."""
        record = self.controller.fate(self.pid, timeout=1.0)
        return record.cause if record is not None else None


class WriterTemplate:
    """The writer's template process (``Writer.template_argv``): it imported the writer's code
    once, and forks one writer per ``fork``. Its answers are read by a thread of its own."""

    def __init__(self, writer: Writer, controller: RuntimeController, folder: Path) -> None:
        assert writer.template_argv is not None
        self.argv = list(writer.template_argv)
        self.marker = new_tree()
        self._errors: IO[str] = open(folder / "writer-template.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            self.argv,
            env=writer_env(writer, controller, self.marker),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
            start_new_session=True,
        )
        self._changed = threading.Condition()
        self._forked: list[int] = []
        self.exits: dict[int, int] = {}
        self._reader = threading.Thread(target=self._read, name="writer-template", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            words = line.split()
            with self._changed:
                if len(words) == 2 and words[0] == "pid":
                    self._forked.append(int(words[1]))
                elif len(words) == 3 and words[0] == "exit":
                    self.exits[int(words[1])] = int(words[2])
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def fork(self, output: Path, timeout: float) -> int:
        """A new writer, its output in ``output``: its pid."""
        assert self.process.stdin is not None
        with self._changed:
            known = len(self._forked)
        self.process.stdin.write(f"run {output}\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._forked) == known:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise StartupGuardError(
                        f"the writer's template {shown(self.argv)} did not fork a"
                        f" writer ({self._ended_how()})"
                    )
                self._changed.wait(min(remaining, 0.1))
            return self._forked[known]

    def wait_exit(self, pid: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while pid not in self.exits:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    return self.exits.get(pid)
                self._changed.wait(min(remaining, 0.1))
            return self.exits[pid]

    def _ended_how(self) -> str:
        code = self.process.poll()
        if code is None:
            return "it did not answer"
        self._errors.flush()
        tail = (Path(self._errors.name).read_text(errors="replace") or "")[-_OUTPUT_TAIL:]
        return f"it exited with code {code}: {tail.strip() or 'no output'}"

    def close(self) -> None:
        """Let it end (its input closed), then end what is left of its tree."""
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        end_group(self.process, 0.0, self.marker)
        self.process.wait()
        self._reader.join(timeout=5.0)
        self._errors.close()


class ForkedRun(WriterRun):
    """One writer forked by the template: the same questions as a ``WriterRun``."""

    def __init__(  # no process of its own to start: WriterRun.__init__ is not called
        self,
        template: WriterTemplate,
        controller: RuntimeController,
        folder: Path,
        number: int,
        timeout: float,
    ) -> None:
        self.output_path = folder / f"writer-{number}.log"
        self.controller = controller
        self.template = template
        self._pid = template.fork(self.output_path, timeout)

    @property
    def pid(self) -> int:
        return self._pid

    def ended(self) -> bool:
        if self._pid in self.template.exits:
            return True
        record = self.controller.processes.get(self._pid)
        return record is not None and record.ended_t is not None

    def wait(self, timeout: float) -> int | None:
        return self.template.wait_exit(self._pid, timeout)

    def end(self) -> None:
        if self._pid in self.template.exits:
            return
        record = self.controller.processes.get(self._pid)
        started = record.started if record is not None else None
        signal_process(self._pid, started, signal.SIGKILL)
        self.template.wait_exit(self._pid, 5.0)


__all__ = [
    "LOCK_OPS",
    "READ_ONLY_OPS",
    "WRITER_MEMBER",
    "ForkedRun",
    "PlainWriter",
    "StateRecorder",
    "Writer",
    "WriterRun",
    "WriterStep",
    "WriterTemplate",
    "checked_pairs",
    "checked_points",
    "checked_writer",
    "steps_of",
    "writer_accesses",
]
