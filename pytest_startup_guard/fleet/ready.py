"""Readiness probes: how the fleet tells that a server has come up, and come up right.

``ready.http(path, status, expect)``, ``ready.tcp()``, ``ready.log(pattern)``, ``ready.file(path)``
and ``ready.call(fn)``. A probe is asked again and again until it says ready, or rejects the
server (it answered, but wrong: ``expect`` said no), or the process exits, or time runs out.
Connection errors while a server starts are simply "not yet".
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Member:
    """What a probe may look at: one fleet member."""

    index: int
    pid: int
    port: int | None
    output_path: Path

    def output(self) -> str:
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
                    f"GET {self.path} answered {response.status} but expect() rejected: {body[:300]}",
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

    def describe(self) -> str:
        return f"ready.log({self.pattern!r})"

    def check(self, member: Member) -> Verdict:
        match = re.search(self.pattern, member.output(), re.MULTILINE)
        return Verdict(True, f"output matched {match.group(0)!r}") if match else NOT_YET


@dataclass(frozen=True)
class File:
    path: str

    def describe(self) -> str:
        return f"ready.file({self.path!r})"

    def check(self, member: Member) -> Verdict:
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


def http(
    path: str = "/health", status: int = 200, expect: Callable[[str], object] | None = None
) -> Http:
    """Ready when ``GET path`` answers ``status``; with ``expect(body)``, the body must also be
    accepted (a true result), else the server is rejected: it came up wrong."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(
            f"invalid path {path!r} for ready.http(): expected a path such as '/health'"
        )
    if not isinstance(status, int) or not 100 <= status <= 599:
        raise ValueError(
            f"invalid status {status!r} for ready.http(): expected an HTTP status code"
        )
    if expect is not None and not callable(expect):
        raise TypeError(
            f"invalid expect {expect!r} for ready.http(): expected a callable on the body"
        )
    return Http(path, status, expect)


def tcp() -> Tcp:
    """Ready when the member's ``{port}`` accepts a connection."""
    return Tcp()


def log(pattern: str) -> Log:
    """Ready when the member's output (stdout or stderr) matches the regular expression."""
    try:
        re.compile(pattern)
    except (re.error, TypeError) as error:
        raise ValueError(f"invalid pattern {pattern!r} for ready.log(): {error}") from None
    return Log(pattern)


def file(path: str | os.PathLike[str]) -> File:
    """Ready when ``path`` exists (``{index}``, ``{port}`` and ``{pid}`` are filled in)."""
    return File(os.fspath(path))


def call(function: Callable[[Member], object]) -> Call:
    """Ready when ``function(member)`` returns true (connection errors count as "not yet")."""
    if not callable(function):
        raise TypeError(f"invalid function {function!r} for ready.call(): expected a callable")
    return Call(function)
