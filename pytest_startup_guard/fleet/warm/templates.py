"""Members forked from a warm template: ``launch(..., warm=True)`` or ``preload=[modules]``.

A template (``template.py``, a process of its own) imports a server's stack once and forks
one member per request; each member then becomes what a cold start of its command would be, so
a launch pays the imports once per session instead of once per member.

- ``forkable``: a member's command as a program a template can run (``Program``: the
  interpreter, its flags, ``-c``/``-m``/a script), or ``NotForkable`` naming why not.
- ``WarmTemplates`` (one per pytest process, for the whole session): one ``Template`` per
  distinct key (interpreter, flags, working folder, preloaded modules, environment minus the
  variables the plugin sets per test and member: ``per_test``). ``warm=True`` without
  ``preload=`` first runs the command once as a probe (cached per command) that stops before
  the start-up's first access of a watched folder, socket bind or connect, fork, exec, thread
  start or sleep, and preloads what it had imported by then.
- A template holds no test state: it runs with a private empty cache of its own
  (``neutral_env``; a member's libraries are pointed at its test's cache after the fork), and
  carries a tree marker of the run (``run_marker``), so that the reaper ends it and every fork
  of it should pytest die; ``close`` ends it at the end of the session.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pytest_startup_guard.cache.hubcache import FakeHubCache
from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.fleet.reaper import Reaper
from pytest_startup_guard.fleet.warm.equivalence import (
    Member,
    argv_differs,
    per_test,
    project_root,
    refusals,
)
from pytest_startup_guard.fleet.warm.forked import ForkedProcess
from pytest_startup_guard.fleet.warm.observe import ARGV_ENV
from pytest_startup_guard.fleet.warm.template import path0
from pytest_startup_guard.runtime.process_group import end_group, session
from pytest_startup_guard.runtime.protocol import RUN_ENV
from pytest_startup_guard.runtime.run_marker import new_tree

MODULE = "pytest_startup_guard.fleet.warm.template"
# How members start: cold, forked from a template, or forked where that is safe and cold where not.
WarmMode = Literal["off", "on", "or_cold"]
# Interpreter flags a template can take on for its members (it starts with them); any other
# (-S, -I, -E, -P, -i, ...) changes what a cold start would do in ways a fork cannot copy.
FLAGS_WITHOUT_VALUE = ("-u", "-B", "-O", "-OO", "-b", "-bb", "-q", "-d", "-v")
FLAGS_WITH_VALUE = ("-W", "-X")
SHOWN_MODULES = 4  # preloaded modules a template's label names
READY_SECONDS = 300.0  # the longest a template's imports may take
REPLY_SECONDS = 30.0  # the longest a fork request may wait for its reply


class NotForkable(StartupGuardError):
    """Why a member cannot be forked from a template (``cause``), in the user's words."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


@dataclass(frozen=True)
class Program:
    """A member's command as the interpreter reads it: ``kind`` ``c`` (``target``: the code),
    ``m`` (a module) or ``script`` (a path), ``args`` after it, and ``orig_argv``."""

    interpreter: str
    flags: tuple[str, ...]
    kind: str
    target: str
    args: tuple[str, ...]
    orig_argv: tuple[str, ...]


# What a member is forked as: its program, its environment, its working folder, its output.
Forking = tuple[Program, Mapping[str, str], str, Path]


def import_argv(program: Program) -> tuple[str, ...]:
    """``sys.argv`` while a cold start of ``program`` imports its modules: the script and its
    arguments, ``-c`` and its arguments, or (``-m``) the module's name for its file's path."""
    first = {"c": "-c", "m": program.target}.get(program.kind, program.target)
    return (first, *program.args)


def forkable(command: Sequence[str], program: str, env: Mapping[str, str]) -> Program:
    """``command`` (its argv[0] resolved to ``program``) as a ``Program``, or ``NotForkable``."""
    if _is_interpreter(program):
        return _interpreter_command(program, list(command[1:]), list(command))
    interpreter, flags = _shebang(program, env)
    if interpreter is None:
        raise NotForkable(
            f"{command[0]!r} is not a Python program (neither a Python interpreter nor a script"
            " whose #! line names one): only Python start-ups can be forked from a template"
        )
    parsed = _interpreter_command(interpreter, [*flags, program, *command[1:]], list(command))
    return Program(
        parsed.interpreter,
        parsed.flags,
        parsed.kind,
        parsed.target,
        parsed.args,
        (interpreter, *flags, program, *command[1:]),
    )


def _is_interpreter(program: str) -> bool:
    return os.path.basename(program).startswith("python") or os.path.realpath(
        program
    ) == os.path.realpath(sys.executable)


def _shebang(program: str, env: Mapping[str, str]) -> tuple[str | None, list[str]]:
    try:
        with open(program, "rb") as handle:
            first = handle.readline(400)
    except OSError:
        return None, []
    if not first.startswith(b"#!"):
        return None, []
    words = first[2:].decode(errors="replace").split()
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        found = shutil.which(words[1], path=env.get("PATH", os.defpath))
        words = [found or words[1], *words[2:]]
    if not words or not _is_interpreter(words[0]) or not os.path.isfile(words[0]):
        return None, []
    return words[0], words[1:]


def _interpreter_command(interpreter: str, rest: list[str], orig: list[str]) -> Program:
    flags: list[str] = []
    position = 0
    while position < len(rest):
        arg = rest[position]
        if arg in ("-c", "-m"):
            if position + 1 >= len(rest):
                raise NotForkable(f"{arg} without its argument")
            kind = arg[1]
            return Program(
                interpreter,
                tuple(flags),
                kind,
                rest[position + 1],
                tuple(rest[position + 2 :]),
                tuple(orig),
            )
        if not arg.startswith("-") or arg == "-":
            if arg == "-":
                raise NotForkable("a program read from standard input ('-') cannot be forked")
            return Program(
                interpreter, tuple(flags), "script", arg, tuple(rest[position + 1 :]), tuple(orig)
            )
        if arg in FLAGS_WITHOUT_VALUE:
            flags.append(arg)
        elif arg in FLAGS_WITH_VALUE and position + 1 < len(rest):
            flags += [arg, rest[position + 1]]
            position += 1
        elif arg[:2] in FLAGS_WITH_VALUE and len(arg) > 2:
            flags.append(arg)
        else:
            supported = ", ".join([*FLAGS_WITHOUT_VALUE, "-W ARG", "-X OPT"])
            raise NotForkable(
                f"the interpreter flag {arg} is not supported by a warm start (supported:"
                f" {supported})"
            )
        position += 1
    raise NotForkable("the interpreter would read its program from standard input")


def neutral_env(folder: Path) -> dict[str, str]:
    """The template's own cache (empty, private): its imports never see a test's cache."""
    return FakeHubCache(folder).env


@dataclass(frozen=True)
class TemplateKey:
    interpreter: str
    flags: tuple[str, ...]
    cwd: str
    preload: tuple[str, ...]
    env: frozenset[tuple[str, str]]


class Template:
    """One template process: started with its key, forks members on request."""

    def __init__(
        self, key: TemplateKey, folder: Path, reaper: Reaper, argv: Sequence[str] = ()
    ) -> None:
        self.key = key
        self.folder = folder
        self.marker = new_tree(reaper)
        self.import_argv = tuple(argv)  # sys.argv while it imports
        # Its own empty cache for the variables that differ per test; every other variable as
        # the members have it (the key), so that what a library reads at import is theirs.
        cache = {k: v for k, v in neutral_env(folder / "cache").items() if per_test(k)}
        self.env = {**dict(key.env), **cache, RUN_ENV: self.marker}
        if argv:
            self.env[ARGV_ENV] = json.dumps(list(argv))
        self._reaper = reaper
        self._lock = threading.Lock()
        self._replies: queue.Queue[tuple[str, str]] = queue.Queue()
        self._forked: dict[int, ForkedProcess] = {}
        self._early: dict[int, int] = {}  # exits reported before their fork's reply was read
        self._table = threading.Lock()
        self.details: dict[str, object] = {}
        requests_read, self._requests = os.pipe()
        self._replies_read, replies_write = os.pipe()
        self.argv = [
            key.interpreter,
            *key.flags,
            "-m",
            MODULE,
            "--serve",
            str(requests_read),
            str(replies_write),
            *key.preload,
        ]
        self.log = folder / "template.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=key.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(requests_read, replies_write),
                start_new_session=True,
            )
        os.close(requests_read)
        os.close(replies_write)
        reaper.add(self.process.pid)
        self._reader = threading.Thread(target=self._read, daemon=True, name="warm-template")
        self._reader.start()

    @property
    def label(self) -> str:
        preload = self.key.preload
        shown = [*self.argv[: self.argv.index("--serve") + 1], *preload[-SHOWN_MODULES:]]
        label = " ".join(shlex.quote(arg) for arg in shown)
        hidden = len(preload) - SHOWN_MODULES
        return label.replace(" --serve", f" --serve ({hidden} more)") if hidden > 0 else label

    @property
    def observed(self) -> list[dict[str, Any]]:
        """What its imports read (``observe.py``)."""
        observed: list[dict[str, Any]] = self.details.get("observed", [])  # type: ignore[assignment]
        return observed

    @property
    def files(self) -> dict[str, str | None]:
        """Each module its imports loaded, and the file it came from."""
        files: dict[str, str | None] = self.details.get("files", {})  # type: ignore[assignment]
        return files

    def describe(self) -> str:
        return f"template pid {self.process.pid} (`{self.label}`, in {self.key.cwd})"

    def wait_ready(self, seconds: float = READY_SECONDS) -> None:
        """Until it imported its modules: a ``NotForkable`` if it refused, or failed."""
        kind, rest = self._reply(seconds, "its imports")
        if kind == "ready":
            self.details = json.loads(rest)
            return
        if kind == "refuse":
            details = json.loads(rest)
            raise NotForkable("; ".join(details["causes"]))
        raise NotForkable(f"the template did not start: {rest}")

    def fork_many(self, members: Sequence[Forking]) -> list[ForkedProcess | NotForkable]:
        """A member per ``(program, env, cwd, output)``, asked for in one write: the template
        forks them one after the other, each once the one before leads its own session. Per
        member its process, or the ``NotForkable`` that says why it was not forked."""
        lines = b"".join(
            (
                "fork "
                + json.dumps(
                    {
                        "kind": program.kind,
                        "target": program.target,
                        "args": list(program.args),
                        "orig_argv": list(program.orig_argv),
                        "env": dict(env),
                        "cwd": cwd,
                        "output": str(output),
                    }
                )
                + "\n"
            ).encode()
            for program, env, cwd, output in members
        )
        results: list[ForkedProcess | NotForkable] = []
        with self._lock:
            try:
                while lines:  # a pipe takes what fits; the template reads as it forks
                    lines = lines[os.write(self._requests, lines) :]
            except OSError as error:
                gone = NotForkable(f"the template is gone ({error.strerror})")
                return [gone for _ in members]
            while len(results) < len(members):
                kind, rest = self._reply(REPLY_SECONDS, "a fork")
                if kind == "pid":
                    with self._table:
                        results.append(self._forked[int(rest)])
                    continue
                refusal = NotForkable(json.loads(rest) if rest.startswith('"') else rest)
                if kind == "error" and rest.startswith('"'):
                    results.append(refusal)  # the template's answer to this one request
                    continue
                # No answer in time, or the template exited: none will come for the rest.
                results += [refusal] * (len(members) - len(results))
        return results

    def _reply(self, seconds: float, what: str) -> tuple[str, str]:
        try:
            return self._replies.get(timeout=seconds)
        except queue.Empty:
            return "error", f"no answer to {what} within {seconds:g} s"

    def _read(self) -> None:
        with open(self._replies_read, "rb") as replies:
            for raw in replies:
                kind, _, rest = raw.decode(errors="replace").strip().partition(" ")
                if kind == "exit":
                    pid, _, code = rest.partition(" ")
                    self._ended(int(pid), int(code))
                    continue
                if kind == "pid":
                    with self._table:
                        process = ForkedProcess(int(rest), self.marker)
                        self._forked[process.pid] = process
                        early = self._early.pop(process.pid, None)
                    if early is not None:
                        process.ended(early)
                self._replies.put((kind, rest))
        tail = self._log_tail()
        self._replies.put(("error", f"the template exited{': ' + tail if tail else ''}"))
        with self._table:
            forked = list(self._forked.values())
        for process in forked:  # nobody will report them now: what ran is gone or orphaned
            if process.returncode is None and not process.alive():
                process.ended(-9)

    def _ended(self, pid: int, code: int) -> None:
        with self._table:
            process = self._forked.get(pid)
            if process is None:
                self._early[pid] = code
        if process is not None:
            process.ended(code)

    def _log_tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return text[-1500:].strip()

    def close(self) -> None:
        """End of the session: close its requests (it exits), then end its group."""
        try:
            os.close(self._requests)
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        end_group(self.process, 0.0, self.marker)
        self.process.wait()
        self._reaper.remove(self.process.pid)


@dataclass(frozen=True)
class WarmStart:
    """How a launch starts its members: forked from ``template``, or cold for ``cold_reason``
    (``warm="or_cold"``)."""

    template: Template | None
    program: str = ""  # argv[0] resolved
    cold_reason: str | None = None

    def fork_many(
        self, members: Sequence[tuple[Sequence[str], Mapping[str, str], str, Path]]
    ) -> list[ForkedProcess | NotForkable]:
        """``Template.fork_many`` for members given as (command, env, cwd, output)."""
        assert self.template is not None
        return self.template.fork_many(
            [
                (forkable(command, self.program, env), env, cwd, output)
                for command, env, cwd, output in members
            ]
        )

    def line(self, count: int) -> str:
        """The fleet summary's line on how its members started."""
        if self.template is None:
            return f"started cold (warm='or_cold'): {self.cold_reason}"
        details = self.template.details
        return (
            f"{count} member(s) forked from warm {self.template.describe()}:"
            f" {len(self.template.key.preload)} module(s) preloaded"
            f" in {float(str(details.get('seconds', 0.0))):.2f} s"
        )


def warm_mode(value: str) -> WarmMode:
    """The run's ``--startup-guard-warm`` as a ``WarmMode`` (the option checked its words)."""
    for mode in get_args(WarmMode):
        if value == mode:
            return mode  # type: ignore[no-any-return]  # one of WarmMode's own values
    raise ValueError(
        f"unknown warm mode {value!r}: expected one of {', '.join(get_args(WarmMode))}"
    )


def warm_choice(
    warm: bool | str | None, preload: Sequence[str] | None, default: WarmMode
) -> WarmMode:
    """``off``, ``on`` or ``or_cold`` for one launch: ``warm=`` where given, ``on`` where only
    ``preload=`` is, else the run's ``--startup-guard-warm``."""
    if warm == "or_cold":
        return "or_cold"
    if warm is True or (warm is None and preload is not None and default != "or_cold"):
        return "on"
    if warm is False:
        return "off"
    return default


@dataclass(frozen=True)
class WarmRequest:
    """A launch's members as a template would fork them."""

    label: str  # the launch's command, for messages
    command: Sequence[str]  # member 0's, its placeholders filled in
    program: str  # what runs: the interpreter, or a script one runs
    env: Mapping[str, str]
    cwd: str
    preload: Sequence[str] | None  # None: the modules a probe finds
    watch: Sequence[str]  # the folders whose first access ends the probe
    timeout: float
    native_accesses: bool = False
    # Every member's command and environment (none given: member 0's, ``command`` and ``env``).
    members: Sequence[tuple[Sequence[str], Mapping[str, str]]] = ()


class WarmTemplates:
    """This pytest process's templates, for the whole session: per key, one for each distinct
    set of arguments its imports read (one, where they read none)."""

    def __init__(self, folder: Path, reaper: Reaper, rootdir: Path | None = None) -> None:
        self.folder = folder
        self.reaper = reaper
        self.rootdir = rootdir  # the test's project: its code is never preloaded unnamed
        self._templates: dict[TemplateKey, list[Template]] = {}
        self._refused: dict[TemplateKey, str] = {}
        # Per command: what it imports before its first access, and after it.
        self._probes: dict[tuple[object, ...], tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._lock = threading.Lock()
        self._started = 0

    def start(self, request: WarmRequest) -> WarmStart:
        """The template every member forks from (started, or found), or ``NotForkable``.
        ``preload=None``: the modules a probe finds (``watch``: the folders whose first access
        ends the probe), less the test's own code."""
        command, program, env, cwd = request.command, request.program, request.env, request.cwd
        parsed = forkable(command, program, env)
        members = [
            Member(import_argv(forkable(argv, program, own)), own)
            for argv, own in (request.members or [(command, env)])
        ]
        roots = self.project_roots(parsed, cwd)
        stable = frozenset((k, v) for k, v in env.items() if not per_test(k))
        with self._lock:
            named: tuple[str, ...] = tuple(request.preload or ())
            if request.preload is not None:
                choices = [tuple(request.preload)]
            else:
                first, later = self._probe(parsed, stable, cwd, request, roots)
                # What the start-up imported after its first access too, where a template of
                # those forks as a cold start would; else what it imported before it.
                choices = [(*first, *later), first] if later else [first]
            for index, preload in enumerate(choices):
                last = index == len(choices) - 1
                key = TemplateKey(parsed.interpreter, parsed.flags, cwd, preload, stable)
                try:
                    if key in self._refused:
                        raise NotForkable(self._refused[key])
                    template = self._template_for(key, members, roots, named, request.timeout)
                    break
                except NotForkable:
                    if last:
                        raise
        return WarmStart(template, program)

    def project_roots(self, program: Program, cwd: str) -> list[str]:
        """The test's own project: the rootdir, the working folder, the app's folder."""
        app = path0(program.kind, program.target, cwd) or cwd
        roots = [str(self.rootdir)] if self.rootdir is not None else []
        return list(dict.fromkeys(os.path.realpath(root) for root in [*roots, cwd, app]))

    def _template_for(
        self,
        key: TemplateKey,
        members: Sequence[Member],
        roots: Sequence[str],
        named: Sequence[str],
        timeout: float,
    ) -> Template:
        """A template of ``key`` every member forks from as a cold start of it would start:
        one started before, or one that imports with member 0's arguments; else
        ``NotForkable`` naming every cause."""
        for template in [*self._templates.get(key, []), None]:
            if template is None:
                template = self._new_template(key, members[0].argv, timeout)
            causes = refusals(template.observed, template.files, roots, named, members)
            moved = argv_differs(template.observed, template.import_argv, members)
            if causes or any(index != 0 for index, _ in moved):
                causes += [why for index, why in moved if index != 0]
                raise NotForkable(f"{'; '.join(causes)}; template command: `{template.label}`")
            if not moved:
                return template
        raise AssertionError("unreachable: a new template imports with member 0's arguments")

    def _new_template(self, key: TemplateKey, argv: Sequence[str], timeout: float) -> Template:
        folder = self.folder / f"template-{self._started}"
        self._started += 1
        folder.mkdir(parents=True, exist_ok=True)
        template = Template(key, folder, self.reaper, argv)
        try:
            template.wait_ready(max(timeout, READY_SECONDS))
        except NotForkable as refusal:
            message = f"{refusal.cause}; template command: `{template.label}`"
            self._refused[key] = message
            template.close()
            raise NotForkable(message) from None
        self._templates.setdefault(key, []).append(template)
        return template

    def for_launch(self, choice: WarmMode, request: WarmRequest) -> WarmStart | None:
        """How a launch (``choice``: ``warm_choice``) starts its members: None (cold, as
        asked), forked, or cold with the reason (``or_cold``); else a ``StartupGuardError``
        naming why its members cannot be forked."""
        if choice == "off":
            return None
        try:
            if request.native_accesses:
                raise NotForkable(
                    "native_accesses=True needs LD_PRELOAD at the interpreter's start, which a"
                    " fork from a template never has"
                )
            start = self.start(request)
        except NotForkable as refusal:
            if choice == "or_cold":
                return WarmStart(None, request.program, refusal.cause)
            raise StartupGuardError(
                f"server_fleet.launch(warm=True) cannot fork the members of `{request.label}` from a"
                f" warm template: {refusal.cause}. Launch with warm='or_cold' to start them"
                " cold where forking is unsafe (the fleet summary says why), or without warm="
                " and preload="
            ) from None
        return start

    def _probe(
        self,
        program: Program,
        stable: frozenset[tuple[str, str]],
        cwd: str,
        request: WarmRequest,
        roots: Sequence[str],
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The modules the start-up imports before its first access, and those it imports
        after it (``probe.py``; cached per command), less the test's own code (``roots``): the
        template imports none of it unnamed. The probe goes on past its first access only in
        a clone of the fake cache member 0 reads, made for it and removed after it."""
        watch, timeout = request.watch, request.timeout
        key = (program.interpreter, program.flags, program.kind, program.target, cwd, stable)
        found = self._probes.get(key)
        if found is not None:
            return found
        folder = self.folder / f"probe-{len(self._probes)}"
        folder.mkdir(parents=True, exist_ok=True)
        member_env = request.members[0][1] if request.members else request.env
        source = FakeHubCache.existing(member_env.get("HF_HOME"))
        clone = source.clone(folder / "clone") if source is not None else None
        probe_env_of = clone.env if clone is not None else neutral_env(folder / "cache")
        cache_env = {k: v for k, v in probe_env_of.items() if per_test(k)}
        spec = {
            "kind": program.kind,
            "target": program.target,
            "args": list(program.args),
            "watch": sorted({*watch, cache_env["HF_HOME"]}),
            "result": str(folder / "modules.json"),
            "clone": str(clone.root) if clone is not None else None,
        }
        (folder / "spec.json").write_text(json.dumps(spec))
        argv = [
            program.interpreter,
            *program.flags,
            "-m",
            MODULE,
            "--probe",
            str(folder / "spec.json"),
        ]
        label = " ".join(shlex.quote(arg) for arg in argv)
        probe_env = {**dict(stable), **cache_env}
        try:
            with session(argv, env=probe_env, cwd=cwd, stderr=subprocess.STDOUT) as process:
                try:
                    printed, _ = process.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    printed = ""  # the session ends its group
        finally:
            if clone is not None:
                shutil.rmtree(clone.root, ignore_errors=True)
        (folder / "output.log").write_text(printed or "")
        result = folder / "modules.json"
        if not result.is_file():
            tail = (folder / "output.log").read_text(errors="replace")[-1500:].strip()
            raise NotForkable(
                f"the probe of the start-up (`{label}`) did not reach its first access of the"
                f" cache, a socket, a fork, an exec, a thread or a sleep within {timeout:g} s"
                + (f": {tail}" if tail else "")
            )
        data = json.loads(result.read_text())
        files = data.get("files", {})

        def outside_project(names: list[str]) -> tuple[str, ...]:
            return tuple(name for name in names if project_root(files.get(name), roots) is None)

        modules = (outside_project(data["modules"]), outside_project(data.get("later", [])))
        self._probes[key] = modules
        return modules

    def close(self) -> None:
        """End every template (session end)."""
        with self._lock:
            templates = [template for same in self._templates.values() for template in same]
            self._templates.clear()
        for template in templates:
            template.close()


__all__ = [
    "ForkedProcess",
    "NotForkable",
    "Program",
    "Template",
    "WarmMode",
    "WarmRequest",
    "WarmStart",
    "WarmTemplates",
    "forkable",
    "import_argv",
    "per_test",
    "warm_choice",
    "warm_mode",
]
