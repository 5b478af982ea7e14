"""What each member of one launch runs, decided before any of them starts.

A ``LaunchPlan`` is a ``LaunchSpec`` (``spec.py``) made concrete for this machine: the program
found on ``PATH``, the environment every member gets, whether it runs Python (and so reports in
at the start barrier), and the port each member is told. ``fill_placeholders`` gives each
member its own command.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_startup_guard.errors import StartupGuardError
from pytest_startup_guard.fleet import ready as ready_module
from pytest_startup_guard.fleet.spec import PLACEHOLDER, PLACEHOLDERS, needs_port


def fill_placeholders(argv: Sequence[str], values: Mapping[str, object]) -> list[str]:
    """Replace ``{port}``, ``{index}``, ``{count}`` and ``{port<i>}`` (the port member i is
    told); any other ``{name}`` is a clear error."""
    filled = []
    for position, arg in enumerate(argv):
        if not isinstance(arg, str):
            raise TypeError(
                f"invalid argv[{position}] {arg!r} for server_fleet.launch(): expected a str"
            )

        def replace(match: re.Match[str], position: int = position, arg: str = arg) -> str:
            name = match.group(1)
            if name not in values:
                known = ", ".join("{" + key + "}" for key in PLACEHOLDERS)
                raise ValueError(
                    f"unknown placeholder {match.group(0)} in argv[{position}] {arg!r} of"
                    f" server_fleet.launch(); known: {known} (write {{{{ and }}}} for braces)"
                )
            return str(values[name])

        filled.append(PLACEHOLDER.sub(replace, arg).replace("{{", "{").replace("}}", "}"))
    return filled


def resolve_command(command: str, env: Mapping[str, str], cwd: Path | None) -> str:
    """The program that will run, or a clear error before anything starts."""
    if os.sep in command:
        path = Path(command) if os.path.isabs(command) or cwd is None else cwd / command
        if not path.is_file():
            raise StartupGuardError(
                f"command {command!r} (argv[0] of server_fleet.launch) does not exist: no such file"
            )
        if not os.access(path, os.X_OK):
            raise StartupGuardError(
                f"command {command!r} (argv[0] of server_fleet.launch) is not executable"
            )
        return str(path)
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise StartupGuardError(
            f"command {command!r} (argv[0] of server_fleet.launch) does not exist:"
            f" not found on PATH={env.get('PATH', '')}"
        )
    return found


def runs_python(program: str) -> bool:
    """Whether the program is a Python interpreter or a script run by one (it will say hello)."""
    if os.path.basename(program).startswith("python") or os.path.realpath(
        program
    ) == os.path.realpath(sys.executable):
        return True
    try:
        with open(program, "rb") as handle:
            first = handle.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def describe_probe(ready: ready_module.Probe) -> str:
    describe = getattr(ready, "describe", None)
    return str(describe()) if callable(describe) else repr(ready)


@dataclass(frozen=True)
class LaunchPlan:
    """What each member of one launch runs, decided before any of them starts."""

    argv: list[str]  # with its placeholders: each member fills in its own
    count: int
    env: dict[str, str]
    cwd: Path | None
    python: bool  # a Python program, which reports in at the start barrier
    member_env: tuple[Mapping[str, str], ...] = ()  # per member, over ``env`` (an explore's caches)
    told: tuple[int | None, ...] = ()  # the port each member is told: ``{port<i>}`` in any argv

    @property
    def label(self) -> str:
        return " ".join(shlex.quote(arg) for arg in self.argv)

    def command(self, index: int, port: int | None) -> list[str]:
        """Member ``index``'s argv, its placeholders filled in."""
        values: dict[str, object] = {
            "port": port if port is not None else "",
            "index": index,
            "count": self.count,
        }
        for other, told in enumerate(self.told):
            values[f"port{other}"] = told if told is not None else ""
        return fill_placeholders(self.argv, values)


__all__ = [
    "LaunchPlan",
    "describe_probe",
    "fill_placeholders",
    "needs_port",
    "resolve_command",
    "runs_python",
]
