"""Readiness probes: how the fleet tells that a server has come up, and come up right.

``ready.http(path, status, expect)``, ``ready.tcp()``, ``ready.log(pattern)``, ``ready.file(path)``
and ``ready.call(fn)``. A probe is asked again and again until it says ready, or rejects the
server (it answered, but wrong: ``expect`` said no), or the process exits, or time runs out.
Connection errors while a server starts are simply "not yet". Each constructor checks its
arguments when it is called (``InvalidArgumentError``), not when the probe is first asked.

``ready.log`` reads a member's output as it grows, only what is new at each poll
(``output.OutputFollower``): a match must lie within ``output.WINDOW_CHARS`` characters.
"""

from __future__ import annotations

import os
import re
import socket
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from typing import Protocol

from pytest_startup_guard.checks import shown
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.fleet.output import OutputFollower
from pytest_startup_guard.wording import printable

# The placeholders ``ready.file(path)`` fills in.
FILE_PLACEHOLDERS = ("index", "port", "pid")


@dataclass(frozen=True)
class Member:
    """What a probe may look at: one fleet member."""

    index: int
    pid: int
    port: int | None
    output_path: Path
    # What of its output ``ready.log`` has read (made with the member); a copy made with
    # ``dataclasses.replace`` (another port) goes on where this one stopped.
    output_follower: OutputFollower | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.output_follower is None:
            object.__setattr__(self, "output_follower", OutputFollower(self.output_path))

    def search_new_output(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        """The first match of ``pattern`` in what it printed since the last search (with the
        end of what it printed before: ``OutputFollower``)."""
        assert self.output_follower is not None  # made in __post_init__
        return self.output_follower.search(pattern)

    def output(self) -> str:
        """All its output so far (as much memory as it printed: ``ready.log`` reads less)."""
        try:
            return self.output_path.read_text(errors="replace")
        except OSError:
            return ""


@dataclass(frozen=True)
class Verdict:
    """``ready`` True: up. ``rejected`` True: it answered, and the answer is wrong (final)."""

    ready: bool
    detail: str = ""
    rejected: bool = False


NOT_YET = Verdict(False)


class Probe(Protocol):
    def check(self, member: Member) -> Verdict: ...

    def describe(self) -> str: ...


def _needs_port(member: Member, probe: str) -> int:
    if member.port is None:
        raise ValueError(f"{probe} needs a port: put {{port}} in the command")
    return member.port


@dataclass(frozen=True)
class Http:
    path: str = "/health"
    status: int = 200
    expect: Callable[[str], object] | None = None
    timeout: float = 2.0

    def describe(self) -> str:
        return f"ready.http({self.path!r}, status={self.status})"

    def check(self, member: Member) -> Verdict:
        port = _needs_port(member, "ready.http()")
        connection = HTTPConnection("127.0.0.1", port, timeout=self.timeout)
        try:
            connection.request("GET", self.path)
            response = connection.getresponse()
            body = response.read().decode("utf-8", errors="replace")
        except (OSError, HTTPException):
            return NOT_YET  # not listening yet, or restarting
        finally:
            connection.close()
        if response.status != self.status:
            return Verdict(False, f"GET {self.path} answered {response.status}, not {self.status}")
        if self.expect is not None:
            try:
                accepted = self.expect(body)
            except Exception as error:
                accepted = False
                body = f"{body[:200]} (expect raised {type(error).__name__}: {error})"
            if accepted is False or accepted is None:
                return Verdict(
                    False,
                    f"GET {self.path} answered {response.status} but expect() rejected:"
                    f" {printable(body[:300])}",
                    rejected=True,
                )
        return Verdict(True, f"GET {self.path} answered {response.status}")


@dataclass(frozen=True)
class Tcp:
    timeout: float = 1.0

    def describe(self) -> str:
        return "ready.tcp()"

    def check(self, member: Member) -> Verdict:
        port = _needs_port(member, "ready.tcp()")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=self.timeout):
                return Verdict(True, f"port {port} accepts connections")
        except OSError:
            return NOT_YET


@dataclass(frozen=True)
class Log:
    pattern: str
    flags: int = re.MULTILINE

    def describe(self) -> str:
        return f"ready.log({self.pattern!r})"

    def check(self, member: Member) -> Verdict:
        match = member.search_new_output(re.compile(self.pattern, self.flags))  # re's cache
        return Verdict(True, f"output matched {match.group(0)!r}") if match else NOT_YET


@dataclass(frozen=True)
class File:
    path: str

    def describe(self) -> str:
        return f"ready.file({self.path!r})"

    @property
    def needs_port(self) -> bool:
        """Whether ``{port}`` is in the path: the member must then have a port."""
        return "port" in _placeholders(self.path)

    def check(self, member: Member) -> Verdict:
        if member.port is None and self.needs_port:
            raise InvalidArgumentError(
                f"{self.describe()} needs a port: put {{port}} in the command"
            )
        path = self.path.format(index=member.index, port=member.port, pid=member.pid)
        return Verdict(True, f"{path} exists") if os.path.exists(path) else NOT_YET


@dataclass(frozen=True)
class Call:
    function: Callable[[Member], object]

    def describe(self) -> str:
        return f"ready.call({getattr(self.function, '__qualname__', self.function)!s})"

    def check(self, member: Member) -> Verdict:
        try:
            result = self.function(member)
        except (OSError, ConnectionError):
            return NOT_YET
        return Verdict(True, "call() returned true") if result else NOT_YET


# What http.client refuses in a request's path (it would fail at the first poll).
_NOT_IN_A_PATH = re.compile(r"[\x00-\x20\x7f]")


def http(
    path: str = "/health", status: int = 200, expect: Callable[[str], object] | None = None
) -> Http:
    """Ready when ``GET path`` answers ``status``; with ``expect(body)``, the body must also be
    accepted (a true result), else the server is rejected: it came up wrong."""
    if not isinstance(path, str):
        raise ArgumentTypeError(
            f"invalid path={shown(path)} for ready.http(): expected a str such as '/health'"
        )
    if not path.startswith("/") or _NOT_IN_A_PATH.search(path):
        raise InvalidArgumentError(
            f"invalid path={path!r} for ready.http(): expected a path such as '/health'"
            " (starting with '/', without spaces or control characters)"
        )
    if not isinstance(status, int) or isinstance(status, bool):
        raise ArgumentTypeError(
            f"invalid status={shown(status)} for ready.http(): expected an HTTP status code"
            " (a whole number from 100 to 599)"
        )
    if not 100 <= status <= 599:
        raise InvalidArgumentError(
            f"invalid status={status!r} for ready.http(): expected an HTTP status code"
            " (a whole number from 100 to 599)"
        )
    if expect is not None and not callable(expect):
        raise ArgumentTypeError(
            f"invalid expect={shown(expect)} for ready.http(): expected a callable on the"
            " body (or None)"
        )
    if expect is not None:
        _takes_one(expect, "expect", "ready.http()", "the body, a str, and returns true when the"
                   " server came up right")  # fmt: skip
    return Http(path, status, expect)


def tcp() -> Tcp:
    """Ready when the member's ``{port}`` accepts a connection."""
    return Tcp()


def log(pattern: str | re.Pattern[str]) -> Log:
    """Ready when the member's output (stdout or stderr) matches the regular expression
    (``re.MULTILINE``: ``^`` and ``$`` match at each line; a compiled pattern keeps its
    flags). A match must lie within ``output.WINDOW_CHARS`` characters of output (a line, or
    lines, of up to 64 Ki characters)."""
    flags = re.MULTILINE
    if isinstance(pattern, re.Pattern) and isinstance(pattern.pattern, str):
        flags |= pattern.flags
        pattern = pattern.pattern
    if not isinstance(pattern, str):
        raise ArgumentTypeError(
            f"invalid pattern={shown(pattern)} for ready.log(): expected a regular expression"
            " as a str (or a compiled str pattern)"
        )
    try:
        compiled = re.compile(pattern, flags)
    except re.error as error:
        raise InvalidArgumentError(
            f"invalid pattern={pattern!r} for ready.log(): expected a regular expression"
            f" (re.compile says: {error})"
        ) from None
    if compiled.search("") is not None:
        raise InvalidArgumentError(
            f"invalid pattern={pattern!r} for ready.log(): it matches empty output, so every"
            " member would be ready before it printed anything; expected a pattern that"
            " matches what a member prints when it is ready"
        )
    return Log(pattern, compiled.flags)


def file(path: str | os.PathLike[str]) -> File:
    """Ready when ``path`` exists (``{index}``, ``{port}`` and ``{pid}`` are filled in; write
    ``{{`` and ``}}`` for braces). A relative path is relative to pytest's working folder."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise ArgumentTypeError(
            f"invalid path={shown(path)} for ready.file(): expected a file path as a str or a"
            " pathlib.Path"
        )
    if not text:
        raise InvalidArgumentError(
            "invalid path='' for ready.file(): expected a file path (not empty)"
        )
    _placeholders(text)
    return File(text)


def _placeholders(path: str) -> set[str]:
    """The placeholders in a ``ready.file`` path, or a clear error for one that is not known
    or a path that ``str.format`` cannot fill in."""
    known = ", ".join("{" + name + "}" for name in FILE_PLACEHOLDERS)
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(path) if name is not None}
        unknown = sorted(names - set(FILE_PLACEHOLDERS))
        if not unknown:
            path.format(index=0, port=0, pid=0)  # a bad format spec: {index:q}
    except (ValueError, IndexError) as error:
        raise InvalidArgumentError(
            f"invalid path={path!r} for ready.file(): {error}; placeholders: {known}"
            " (write {{ and }} for braces)"
        ) from None
    if unknown:
        raise InvalidArgumentError(
            f"unknown placeholder {{{unknown[0]}}} in path={path!r} for ready.file(); known:"
            f" {known} (write {{{{ and }}}} for braces)"
        )
    return names


def call(function: Callable[[Member], object]) -> Call:
    """Ready when ``function(member)`` returns true (connection errors count as "not yet")."""
    if not callable(function):
        raise ArgumentTypeError(
            f"invalid function={shown(function)} for ready.call(): expected a callable that takes"
            " the member (ready.Member) and returns true when it is ready"
        )
    _takes_one(function, "function", "ready.call()", "the member, a ready.Member, and returns"
               " true when it is ready")  # fmt: skip
    return Call(function)


def _takes_one(function: Callable[..., object], name: str, where: str, what: str) -> None:
    """``function`` can be called with one positional argument, as the probe will call it:
    refused here, not at the first poll once the members started."""
    import inspect  # only when a probe is made with a callable

    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a built-in without a signature: called as given
        return
    try:
        signature.bind(None)
    except TypeError as error:
        takes = (
            "it takes no argument"
            if not signature.parameters
            else f"its signature {signature} cannot take one argument ({error})"
        )
        raise ArgumentTypeError(
            f"invalid {name}={shown(function)} for {where}: {takes}; expected a callable that"
            f" takes one argument ({what})"
        ) from None
