"""``LaunchSpec``: one launch as the user asked for it, checked once, passed whole.

``server_fleet.launch()``, ``server_fleet.explore()`` and ``server_fleet.explore_writer()`` build
one from their arguments (``LaunchSpec.checked``) before anything is cloned, leased or started;
the launcher, the watcher, exploration and warm starts read it and never check again. An
exploration launches variants of it (``dataclasses.replace``: another count, each member's
cache).

A mistake would otherwise surface late and in someone else's words: ``env={"X": 1}`` as
``Popen``'s ``TypeError`` naming neither ``env`` nor ``X``, a ``cwd`` that does not exist as a
``FileNotFoundError`` once the first member starts, a ``cache`` that is not a fake cache as an
``AttributeError``. Each check names the argument, the value and what is accepted.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict, cast

from pytest_startup_guard.cache.hubcache import FakeHubCache
from pytest_startup_guard.checks import (
    environment,
    flag,
    folder,
    instance,
    seconds,
    shown,
    texts,
    whole_number,
)
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.faults.armed import LaunchShape, check_faults
from pytest_startup_guard.faults.kinds import Fault
from pytest_startup_guard.fleet import ready as ready_module
from pytest_startup_guard.runtime.protocol import (
    ACCESS_SITES_ENV,
    ANCESTRY_ENV,
    MEMBER_ENV,
    PLAN_ENV,
    RUN_ENV,
    WRITER_STEPS_ENV,
)

if TYPE_CHECKING:
    from typing_extensions import Required  # typing has it from Python 3.11

PROBES = "ready.http(), ready.tcp(), ready.log(...), ready.file(...) or ready.call(...)"
PLACEHOLDERS = ("port", "index", "count", "port<i>")
PLACEHOLDER = re.compile(r"\{(\w*)\}")
_OTHER_PORT = re.compile(r"port(\d+)")  # {port0}: the port member 0 is told
_TOLD_PORT = re.compile(r"\{port\d*\}")  # {port}, or {port0}: a port in the command
# What a shell, ``str.format`` or a user reads as one ``{...}`` of a command (``{{`` and ``}}``
# write braces), and one that means a placeholder with more to it: ``{index:x}``,
# ``{port-1}``, ``{count!r}``, ``{ port }``. Those go to the command literally if not refused.
_BRACES = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
_LOOKALIKE = re.compile(r"\{\s*(port\d*|index|count)\b")
# The most members (and worker processes per member) one launch starts at once: each is a
# process tree with a leased loopback port, an output file and a place at the start barrier;
# more is a typo (count=10**6 plans a million before anything fails).
MAX_MEMBERS = 256
# ``warm=``: True (fork from a template), False (cold), "or_cold" (fork, or cold where forking
# is unsafe), None (the run's --startup-guard-warm).
Warm = bool | Literal["or_cold"] | None
Faults = Sequence[Fault] | Fault | None


class FleetOptions(TypedDict, total=False):
    """The keywords of every entry point that starts a fleet (``explore_writer``'s readers)."""

    count: int
    ready: Required[ready_module.Probe]
    env: Mapping[str, str] | None
    timeout: float | None
    cwd: str | os.PathLike[str] | None


class ExploreOptions(FleetOptions, total=False):
    """``server_fleet.explore()``'s keywords for the fleet it launches."""

    warm: Warm
    preload: Sequence[str] | None
    native_accesses: bool


class LaunchOptions(ExploreOptions, total=False):
    """``server_fleet.launch()``'s keywords."""

    cache: FakeHubCache | None
    ports: Sequence[int] | None
    faults: Faults
    workers: int | None


@dataclass(frozen=True)
class LaunchSpec:
    """One launch, checked: what each member runs, how many, how readiness is told, and what
    the launch puts in their way. Built by ``checked``; variants by ``dataclasses.replace``."""

    argv: tuple[str, ...]  # with its placeholders ({port}, {index}, ...): each member fills its own
    count: int
    ready: ready_module.Probe
    timeout: float  # seconds of readiness per member (the fixture's default where none given)
    env: Mapping[str, str] | None = None  # over the cache's env
    cwd: Path | None = None
    cache: FakeHubCache | None = None  # None: the test's hub_cache
    ports: tuple[int, ...] | None = None  # the port each member is told, instead of a lease
    faults: Faults = None  # as given: the faults wing checks and arms them (``faults.kinds``)
    workers: int | None = None  # worker processes per member a member needs to be ready
    native_accesses: bool = False
    warm: Warm = None
    preload: tuple[str, ...] | None = None
    # Per member, over ``env``: an exploration's private caches (never a user's argument).
    member_env: tuple[Mapping[str, str], ...] = field(default=())

    @classmethod
    def checked(
        cls,
        where: str,
        argv: object,
        options: Mapping[str, object],
        accepted: type[FleetOptions],
        *,
        default_timeout: float,
    ) -> LaunchSpec:
        """Every argument of one launch, or an error naming the first bad one (``where``:
        ``server_fleet.launch()``, ``server_fleet.explore()``, ...). ``options`` are the
        keywords the entry point was given, ``accepted`` the ones it takes."""
        _keywords(options, accepted, where)
        count, ready, timeout = options.get("count", 1), options["ready"], options.get("timeout")
        env, cwd, cache = options.get("env"), options.get("cwd"), options.get("cache")
        ports, faults, workers = options.get("ports"), options.get("faults"), options.get("workers")
        native_accesses = options.get("native_accesses", False)
        warm, preload = options.get("warm"), options.get("preload")
        checked_argv = _argv(argv, where)
        checked_count = whole_number("count", count, where, minimum=1, maximum=MAX_MEMBERS)
        probe = _probe(ready, where)
        checked_timeout = (
            default_timeout
            if timeout is None
            else seconds("timeout", timeout, where, positive=True)
        )
        checked_env, checked_cwd, checked_cache = _where_members_run(env, cwd, cache, where)
        checked_ports = _ports(ports, checked_count, where) if ports is not None else None
        checked_workers = _workers(workers, where) if workers is not None else None
        native = flag("native_accesses", native_accesses, where)
        checked_warm, checked_preload = _warm(warm, preload, where)
        _placeholders(checked_argv, where, checked_count)
        _port_told(checked_argv, probe, checked_ports, where)
        check_faults(
            faults, LaunchShape(checked_count, needs_port(checked_argv, probe), probe.describe())
        )
        return cls(
            argv=tuple(checked_argv),
            count=checked_count,
            ready=probe,
            timeout=checked_timeout,
            env=checked_env,
            cwd=checked_cwd,
            cache=checked_cache,
            ports=checked_ports,
            faults=cast(Faults, faults),  # the faults wing checks them as it arms them
            workers=checked_workers,
            native_accesses=native,
            warm=checked_warm,
            preload=checked_preload,
        )

    @property
    def label(self) -> str:
        """The command as a shell would show it, placeholders unfilled."""
        return " ".join(shlex.quote(arg) for arg in self.argv)


def _keywords(options: Mapping[str, object], accepted: type[FleetOptions], where: str) -> None:
    """Only the keywords ``where`` takes (a TypedDict's, its bases' included), and ready=."""
    known = set(accepted.__annotations__)
    for name in options:
        if name not in known:
            raise ArgumentTypeError(
                f"{where} got an unexpected keyword argument {name!r}; it takes"
                f" {', '.join(sorted(known))}"
            )
    if "ready" not in options:
        raise ArgumentTypeError(f"{where} needs ready=: {PROBES}")


def _where_members_run(
    env: object, cwd: object, cache: object, where: str
) -> tuple[dict[str, str] | None, Path | None, FakeHubCache | None]:
    """``env`` (over the cache's), ``cwd`` and ``cache``, each checked where given."""
    checked_cache = None
    if cache is not None:
        checked_cache = instance(
            "cache",
            cache,
            FakeHubCache,
            where,
            "a FakeHubCache (the hub_cache fixture, or FakeHubCache(tmp_path / 'cache'))",
        )
    return (
        _not_the_plugins(environment("env", env, where), where) if env is not None else None,
        folder("cwd", cwd, where) if cwd is not None else None,
        checked_cache,
    )


def _workers(workers: object, where: str) -> int:
    return whole_number(
        "workers",
        workers,
        where,
        minimum=1,
        maximum=MAX_MEMBERS,
        meaning="worker processes per member",
    )


def _not_the_plugins(env: dict[str, str], where: str) -> dict[str, str]:
    """``env`` without ``STARTUP_GUARD_*``: those are the plugin's. The child runtime's own
    (``STARTUP_GUARD_PLAN``, ...) would detach a member from the test's runtime without a
    word; a setting of the run (``STARTUP_GUARD_TIMEOUT``) is read by pytest, not a member."""
    for name in env:
        if not name.startswith(_OURS):
            continue
        if name in _RUNTIME_VARIABLES:
            why = (
                f"{name} is the child runtime's own variable, which the plugin sets for every"
                " member (a value of yours would detach the members from the test's runtime)"
            )
        else:
            setting = name[len(_OURS) :].lower()
            flag = "--startup-target" if setting == "target" else "--startup-guard-" + setting
            flag = flag.replace("_", "-")
            why = (
                f"{_OURS}* variables are the run's settings, read by pytest and not by a"
                f" member: give the run {flag} (or {name} where pytest runs)"
                + ("; for this launch alone, timeout=" if setting == "timeout" else "")
            )
        raise InvalidArgumentError(
            f"invalid env[{name!r}] for {where}: {why}; leave it out of env="
        )
    return env


_OURS = "STARTUP_GUARD_"
_RUNTIME_VARIABLES = (
    PLAN_ENV,
    MEMBER_ENV,
    ANCESTRY_ENV,
    RUN_ENV,
    WRITER_STEPS_ENV,
    ACCESS_SITES_ENV,
)


def _argv(argv: object, where: str) -> list[str]:
    """The command as a list of str: a list (or tuple) of str, or one str split as a shell
    would (``"python -m server --port {port}"``)."""
    if isinstance(argv, str):
        try:
            parts = shlex.split(argv)
        except ValueError as error:
            raise InvalidArgumentError(
                f"invalid argv={shown(argv)} for {where}: it does not split as a command line:"
                f" {error}"
            ) from None
    elif isinstance(argv, (list, tuple)):
        parts = list(argv)
    else:
        raise ArgumentTypeError(
            f"invalid argv={shown(argv)} for {where}: expected the command as a list of str"
            " (['python', '-m', 'server', '--port', '{port}']) or one str"
        )
    if not parts:
        raise InvalidArgumentError(f"invalid argv={shown(argv)} for {where}: the command is empty")
    for position, part in enumerate(parts):
        if isinstance(part, os.PathLike):
            part = os.fspath(part)
        if not isinstance(part, str):
            raise ArgumentTypeError(
                f"invalid argv[{position}]={shown(part)} for {where}: expected a str"
                + (" (write it as a str: str(value))" if isinstance(part, (int, float)) else "")
            )
        parts[position] = part
    if not parts[0].strip():
        raise InvalidArgumentError(
            f"invalid argv[0]={parts[0]!r} for {where}: expected the program to run"
        )
    return parts


def _probe(ready: object, where: str) -> ready_module.Probe:
    """A readiness probe made by one of the ``ready`` functions (not the function itself, nor
    its class: ``ready.Http`` has ``check`` and ``describe``, but unbound)."""
    if isinstance(ready, type):
        lowered = ready.__name__.lower()
        hint = f" (call it: ready.{lowered}(...))" if lowered in _PROBE_NAMES else ""
        raise ArgumentTypeError(
            f"invalid ready={shown(ready)} for {where}: a class, not a probe{hint};"
            f" expected {PROBES}"
        )
    if hasattr(ready, "check") and hasattr(ready, "describe"):
        return cast(ready_module.Probe, ready)  # it has what the watcher calls
    if hasattr(ready, "check"):  # a probe of the user's own: say what it lacks
        raise ArgumentTypeError(
            f"invalid ready={shown(ready)} for {where}: a probe needs check(member) and"
            " describe() (ready.Probe); this one has no describe()"
        )
    name = getattr(ready, "__name__", None)
    hint = f" (call it: ready.{name}(...))" if callable(ready) and name in _PROBE_NAMES else ""
    raise ArgumentTypeError(f"invalid ready={shown(ready)} for {where}{hint}: expected {PROBES}")


_PROBE_NAMES = ("http", "tcp", "log", "file", "call")
WARM_CHOICES: tuple[Warm, ...] = (True, False, "or_cold")
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _warm(warm: object, preload: object, where: str) -> tuple[Warm, tuple[str, ...] | None]:
    """``warm``: None (the run's ``--startup-guard-warm``), True, False or ``"or_cold"``;
    ``preload``: None or module names to import once in the template (``fleet/warm/templates.py``)."""
    if warm is not None and not isinstance(warm, bool) and warm != "or_cold":
        kind = ArgumentTypeError if not isinstance(warm, (bool, str)) else InvalidArgumentError
        raise kind(
            f"invalid warm={shown(warm)} for {where}: expected True (fork members from a warm"
            " template, refused where forking is unsafe), 'or_cold' (fork, or start cold and"
            " say why), False (start cold) or None (the run's --startup-guard-warm)"
        )
    checked_warm: Warm = warm if warm is None or isinstance(warm, bool) else "or_cold"
    if preload is None:
        return checked_warm, None
    names = texts("preload", preload, where, meaning="module names to import once", empty=False)
    for position, name in enumerate(names):
        if not _MODULE_NAME.fullmatch(name):
            raise InvalidArgumentError(
                f"invalid preload[{position}]={name!r} for {where}: expected a module name to"
                " import, such as 'transformers' or 'huggingface_hub.file_download'"
            )
    if warm is False:
        raise InvalidArgumentError(
            f"invalid warm=False with preload={shown(names)} for {where}: preload= forks the"
            " members from a template that imported those modules; drop warm=False, or preload="
        )
    return checked_warm, tuple(names)


def _ports(ports: object, count: int, where: str) -> tuple[int, ...]:
    if isinstance(ports, (str, bytes)) or not isinstance(ports, Sequence):
        raise ArgumentTypeError(
            f"invalid ports={shown(ports)} for {where}: expected a list of port numbers, one per"
            " member"
        )
    if len(ports) != count:
        raise InvalidArgumentError(
            f"invalid ports={shown(list(ports))} for {where}: {len(ports)} port(s) for"
            f" count={count}; give one port per member"
        )
    return tuple(
        whole_number(f"ports[{position}]", port, where, minimum=1, maximum=65535)
        for position, port in enumerate(ports)
    )


def needs_port(argv: Sequence[str], ready: ready_module.Probe) -> bool:
    """Whether members get a port: argv has ``{port}``, or the probe connects to one."""
    return any(_TOLD_PORT.search(arg) for arg in argv) or _probe_needs_port(ready)


def _probe_needs_port(ready: ready_module.Probe) -> bool:
    return isinstance(ready, (ready_module.Http, ready_module.Tcp)) or bool(
        getattr(ready, "needs_port", False)  # ready.file("...{port}...")
    )


def _port_told(
    argv: Sequence[str], ready: ready_module.Probe, ports: tuple[int, ...] | None, where: str
) -> None:
    """A probe that connects to each member's port needs the member told it: ``{port}`` in
    the command, or ``ports=`` (a server that listens on a port of its own choosing). Else
    every member is probed on a port it never heard of, until the time-out."""
    if ports is not None or not _probe_needs_port(ready):
        return
    if any(_TOLD_PORT.search(arg) for arg in argv):
        return
    raise InvalidArgumentError(
        f"invalid ready={ready.describe()} for {where}: it probes the port each member is"
        f" told, and the command {shlex.join(argv)!r} has no {{port}}: put {{port}} in the"
        " command (['--port', '{port}']), give ports=[...] for a server that listens on a"
        " fixed port, or probe readiness another way (ready.log(...), ready.file(...))"
    )


def _placeholders(argv: Sequence[str], where: str, count: int) -> None:
    """Only ``{port}``, ``{index}``, ``{count}`` and ``{port<i>}`` for a member i of the launch
    (as ``plan.fill_placeholders`` reads them: ``{{`` and ``}}`` write braces around
    anything else)."""
    for position, arg in enumerate(argv):
        _lookalikes(arg, position, where)
        for match in PLACEHOLDER.finditer(arg):
            other = _OTHER_PORT.fullmatch(match.group(1))
            if other is not None:
                if int(other.group(1)) >= count:
                    raise InvalidArgumentError(
                        f"invalid placeholder {match.group(0)} in argv[{position}] {arg!r} of"
                        f" {where}: {{port<i>}} names member i's port, and this launch has"
                        f" members 0 to {count - 1} (count={count})"
                    )
                continue
            if match.group(1) not in PLACEHOLDERS:
                known = ", ".join("{" + key + "}" for key in PLACEHOLDERS)
                raise InvalidArgumentError(
                    f"unknown placeholder {match.group(0)} in argv[{position}] {arg!r} of"
                    f" {where}; known: {known} (write {{{{ and }}}} for braces)"
                )


def _lookalikes(arg: str, position: int, where: str) -> None:
    """A placeholder with a format spec, a conversion, arithmetic or blanks (``{index:x}``,
    ``{port-1}``): filled as nothing, it would reach the command as written."""
    for match in _BRACES.finditer(arg):
        text = match.group(0)
        name = _LOOKALIKE.match(text)
        if name is None or PLACEHOLDER.fullmatch(text):
            continue
        raise InvalidArgumentError(
            f"invalid placeholder {text} in argv[{position}] {arg!r} of {where}: a placeholder"
            f" is filled in as is, without format specs, conversions, arithmetic or blanks;"
            f" write {{{name.group(1)}}} (and compute the rest in the server), or {{{{ and }}}}"
            " for braces"
        )


__all__ = [
    "MAX_MEMBERS",
    "PLACEHOLDERS",
    "PROBES",
    "WARM_CHOICES",
    "ExploreOptions",
    "Faults",
    "FleetOptions",
    "LaunchOptions",
    "LaunchSpec",
    "Warm",
    "needs_port",
]
