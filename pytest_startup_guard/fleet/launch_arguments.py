"""The arguments of ``server_fleet.launch()`` and ``server_fleet.explore()``, checked before
anything is cloned, leased or started.

A mistake here would otherwise surface late and in someone else's words: ``env={"X": 1}`` as
``Popen``'s ``TypeError`` naming neither ``env`` nor ``X``, a ``cwd`` that does not exist as a
``FileNotFoundError`` once the first member starts, a ``cache`` that is not a fake cache as an
``AttributeError``. Each check names the argument, the value and what is accepted.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

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

PROBES = "ready.http(), ready.tcp(), ready.log(...), ready.file(...) or ready.call(...)"
PLACEHOLDERS = ("port", "index", "count", "port<i>")
_PLACEHOLDER = re.compile(r"\{(\w*)\}")
_OTHER_PORT = re.compile(r"port(\d+)")  # {port0}: the port member 0 is told


@dataclass(frozen=True)
class LaunchArguments:
    """What a launch was given, checked: ``argv`` as a list, the time-out in seconds."""

    argv: list[str]
    timeout: float


def check_launch(
    where: str,
    argv: object,
    *,
    count: object,
    ready: object,
    timeout: object,
    default_timeout: float,
    env: object = None,
    cwd: object = None,
    cache: object = None,
    ports: object = None,
    workers: object = None,
    native_accesses: object = False,
    warm: object = None,
    preload: object = None,
) -> LaunchArguments:
    """Every argument of one launch, or an error naming the first bad one (``where``:
    ``server_fleet.launch()`` or ``server_fleet.explore()``)."""
    checked_argv = _argv(argv, where)
    checked_count = whole_number("count", count, where, minimum=1)
    _probe(ready, where)
    checked_timeout = (
        default_timeout if timeout is None else seconds("timeout", timeout, where, positive=True)
    )
    if env is not None:
        environment("env", env, where)
    if cwd is not None:
        folder("cwd", cwd, where)
    if cache is not None:
        instance(
            "cache",
            cache,
            FakeHubCache,
            where,
            "a FakeHubCache (the hub_cache fixture, or FakeHubCache(tmp_path / 'cache'))",
        )
    if ports is not None:
        _ports(ports, checked_count, where)
    if workers is not None:
        whole_number("workers", workers, where, minimum=1, meaning="worker processes per member")
    flag("native_accesses", native_accesses, where)
    _warm(warm, preload, where)
    _placeholders(checked_argv, where, checked_count)
    return LaunchArguments(checked_argv, checked_timeout)


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


def _probe(ready: object, where: str) -> None:
    """A readiness probe made by one of the ``ready`` functions (not the function itself)."""
    if hasattr(ready, "check") and hasattr(ready, "describe"):
        return
    if hasattr(ready, "check"):  # a probe of the user's own: say what it lacks
        raise ArgumentTypeError(
            f"invalid ready={shown(ready)} for {where}: a probe needs check(member) and"
            " describe() (ready.Probe); this one has no describe()"
        )
    name = getattr(ready, "__name__", None)
    hint = f" (call it: ready.{name}(...))" if callable(ready) and name in _PROBE_NAMES else ""
    raise ArgumentTypeError(f"invalid ready={shown(ready)} for {where}{hint}: expected {PROBES}")


_PROBE_NAMES = ("http", "tcp", "log", "file", "call")
WARM_CHOICES = (True, False, "or_cold")
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _warm(warm: object, preload: object, where: str) -> None:
    """``warm``: None (the run's ``--startup-guard-warm``), True, False or ``"or_cold"``;
    ``preload``: None or module names to import once in the template (``fleet/warm/templates.py``)."""
    if warm is not None and not isinstance(warm, bool) and warm != "or_cold":
        kind = ArgumentTypeError if not isinstance(warm, (bool, str)) else InvalidArgumentError
        raise kind(
            f"invalid warm={shown(warm)} for {where}: expected True (fork members from a warm"
            " template, refused where forking is unsafe), 'or_cold' (fork, or start cold and"
            " say why), False (start cold) or None (the run's --startup-guard-warm)"
        )
    if preload is None:
        return
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


def _ports(ports: object, count: int, where: str) -> None:
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
    for position, port in enumerate(ports):
        whole_number(f"ports[{position}]", port, where, minimum=1, maximum=65535)


def _placeholders(argv: Sequence[str], where: str, count: int) -> None:
    """Only ``{port}``, ``{index}``, ``{count}`` and ``{port<i>}`` for a member i of the launch
    (as ``launcher.fill_placeholders`` reads them: ``{{`` and ``}}`` write braces around
    anything else)."""
    for position, arg in enumerate(argv):
        for match in _PLACEHOLDER.finditer(arg):
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


__all__ = ["PLACEHOLDERS", "PROBES", "WARM_CHOICES", "LaunchArguments", "check_launch"]
