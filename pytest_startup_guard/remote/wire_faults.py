"""Faults on the wire of the loopback hub: slow bodies, dropped connections, 5xx, a wrong ETag.

Deterministic like the other faults: a fault acts on the ``nth`` request that matches it (counted
over every process of the test, in the order the server reads them) and on the ``times - 1``
matching requests after it (``times=None``: every one from the nth on). One that no request met
fails the test at teardown, unless it was made with ``allow_miss=True``.

What matches: ``filename`` names a file of the repo; the fault acts on requests for it: its body
(a GET of ``resolve``, or of the CDN path an LFS file is redirected to) for ``slow_body`` and
``drop_connection``; its metadata or body (HEAD or GET of ``resolve``) for ``server_error`` and
``wrong_etag``. ``filename=None`` with ``server_error`` matches the repo-info call
(``/api/models/<repo>/revision/<rev>``) that ``snapshot_download`` makes first.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Literal

from pytest_startup_guard.checks import flag, seconds, shown, whole_number
from pytest_startup_guard.errors import ArgumentTypeError
from pytest_startup_guard.remote.repos import checked_filename

WireKind = Literal["slow_body", "drop_connection", "server_error", "wrong_etag"]
KINDS: tuple[WireKind, ...] = ("slow_body", "drop_connection", "server_error", "wrong_etag")
BODY_KINDS: tuple[WireKind, ...] = ("slow_body", "drop_connection")  # they act on a body sent


@dataclass(frozen=True)
class WireFault:
    """A fault on the wire, not yet armed: ``hub_remote.inject(fault)`` arms it."""

    kind: WireKind
    filename: str | None
    nth: int
    times: int | None
    allow_miss: bool
    delay: float = 0.0  # slow_body: seconds between chunks
    chunk: int = 0  # slow_body: bytes a chunk
    after_bytes: int = 0  # drop_connection
    status: int = 0  # server_error

    def describe(self) -> str:
        what = {
            "slow_body": f"slow_body({self.filename!r}, {self.chunk} bytes every {self.delay:g} s)",
            "drop_connection": f"drop_connection({self.filename!r}, after_bytes={self.after_bytes})",
            "server_error": f"server_error({self.filename!r}, status={self.status})",
            "wrong_etag": f"wrong_etag({self.filename!r})",
        }[self.kind]
        times = "every time" if self.times is None else f"times={self.times}"
        return f"{what} at request {self.nth}, {times}"


def _common(
    kind: WireKind, filename: object, nth: object, times: object, allow_miss: object
) -> WireFault:
    """A ``kind`` fault with what every kind takes checked (``filename``, ``nth``, ``times``,
    ``allow_miss``); its own arguments are checked next, by its constructor."""
    where = f"{kind}()"
    if filename is None and kind == "server_error":  # the repo-info call
        name = None
    elif not isinstance(filename, str):
        raise ArgumentTypeError(
            f"invalid filename={shown(filename)} for {where}: expected a file of the repo,"
            " such as 'config.json'"
        )
    else:
        name = checked_filename(filename, where)
    whole_number("nth", nth, where, minimum=1, meaning="the matching request it acts on")
    if times is not None:
        whole_number("times", times, where, minimum=1, meaning="requests in a row, or None")
    flag("allow_miss", allow_miss, where)
    assert isinstance(nth, int) and (times is None or isinstance(times, int))
    return WireFault(kind, name, nth, times, bool(allow_miss))


def slow_body(
    filename: str,
    *,
    delay: float = 0.05,
    chunk: int = 4096,
    nth: int = 1,
    times: int | None = 1,
    allow_miss: bool = False,
) -> WireFault:
    """The file's body is sent ``chunk`` bytes at a time, ``delay`` seconds apart."""
    fault, where = _common("slow_body", filename, nth, times, allow_miss), "slow_body()"
    return replace(
        fault,
        delay=seconds("delay", delay, where),
        chunk=whole_number(
            "chunk", chunk, where, minimum=1, meaning="bytes sent between two pauses"
        ),
    )


def drop_connection(
    filename: str,
    *,
    after_bytes: int,
    nth: int = 1,
    times: int | None = 1,
    allow_miss: bool = False,
) -> WireFault:
    """The connection is closed after ``after_bytes`` bytes of the file's body (a download cut
    off: the client has a partial file and must resume with ``Range`` or start again)."""
    fault = _common("drop_connection", filename, nth, times, allow_miss)
    cut = whole_number(
        "after_bytes", after_bytes, "drop_connection()", meaning="bytes sent before the cut"
    )
    return replace(fault, after_bytes=cut)


def server_error(
    filename: str | None = None,
    *,
    status: int = 503,
    nth: int = 1,
    times: int | None = 1,
    allow_miss: bool = False,
) -> WireFault:
    """The request is answered with ``status`` (500 to 599) and no body."""
    fault = _common("server_error", filename, nth, times, allow_miss)
    return replace(
        fault,
        status=whole_number(
            "status", status, "server_error()", minimum=500, maximum=599, meaning="a 5xx status"
        ),
    )


def wrong_etag(
    filename: str,
    *,
    nth: int = 1,
    times: int | None = 1,
    allow_miss: bool = False,
) -> WireFault:
    """The file's ``ETag`` (and ``X-Linked-Etag``) name other content than the body sent."""
    return _common("wrong_etag", filename, nth, times, allow_miss)


@dataclass(frozen=True)
class RequestEffect:
    """A request a wire fault acted on (an ``Effect`` of ``faults/protocol.py``): the wire
    cannot tell which member, nor which process, sent it."""

    what: str  # "it answered GET /api/models/... with its fault"
    member: int | None = None
    pid: int | None = None


@dataclass
class ArmedWireFault:
    """A fault in force on one remote: the matching requests it has seen and acted on. It
    answers what every armed fault answers (``faults/protocol.py``'s ``ArmedFault``, which
    ``remote`` may not import: it fits it by shape)."""

    fault: WireFault
    seen: int = 0
    hits: int = 0
    paths: list[str] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return self.hits > 0

    @property
    def allow_miss(self) -> bool:
        return self.fault.allow_miss

    @property
    def effects(self) -> list[RequestEffect]:
        return [RequestEffect(f"it acted on {path}") for path in self.paths]

    def miss(self) -> str | None:
        """Why it proves nothing, for the test's teardown; None when it was met or may miss."""
        if self.met or self.allow_miss:
            return None
        return (
            f"{self.describe()}: no request met it ({self.seen} matching request(s) seen;"
            " allow_miss=True if that may be)"
        )

    def lines(self) -> list[str]:
        if not self.met:
            return [f"wire fault {self.describe()}: NEVER MET ({self.seen} matching request(s))"]
        return [
            f"wire fault {self.describe()}: met: acted on {self.hits} of {self.seen} request(s)"
        ]

    def cause(self, index: int) -> str | None:
        """None: the wire cannot tell which member sent a request."""
        return None

    def take(self, path: str) -> bool:
        """Count a matching request; whether the fault acts on it."""
        self.seen += 1
        first, times = self.fault.nth, self.fault.times
        acts = self.seen >= first and (times is None or self.seen < first + times)
        if acts:
            self.hits += 1
            self.paths.append(path)
        return acts

    def describe(self) -> str:
        return self.fault.describe()


class WireFaults:
    """The faults armed on one remote; the server asks which acts on a request."""

    def __init__(self) -> None:
        self.armed: list[ArmedWireFault] = []
        self._lock = threading.Lock()

    def arm(self, faults: tuple[object, ...], where: str) -> list[ArmedWireFault]:
        armed = []
        for fault in faults:
            if not isinstance(fault, WireFault):
                raise ArgumentTypeError(
                    f"invalid fault {shown(fault)} for {where}: expected a fault on the wire:"
                    f" {', '.join(KINDS)} (from pytest_startup_guard)"
                )
            armed.append(ArmedWireFault(fault))
        with self._lock:
            self.armed.extend(armed)
        return armed

    def acting(self, filename: str | None, *, body: bool, path: str) -> ArmedWireFault | None:
        """The first armed fault that acts on this request (each matching one counts it)."""
        found = None
        with self._lock:
            for armed in self.armed:
                fault = armed.fault
                if fault.filename != filename:
                    continue
                if fault.kind in BODY_KINDS and not body:
                    continue
                if armed.take(path) and found is None:
                    found = armed
        return found

    def listed(self) -> list[ArmedWireFault]:
        """Every fault armed on the remote, in the order injected."""
        with self._lock:
            return list(self.armed)

    def unmet(self) -> list[str]:
        with self._lock:
            return [miss for armed in self.armed if (miss := armed.miss()) is not None]
