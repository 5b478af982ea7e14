"""The one question set every armed fault answers, whatever its family.

Ports (``port_taken``, ``same_port``, ``port_stolen``), locks (``lock_not_exclusive``), what
processes do (``fs_error``, ``network_fs``, ``interleave``, ``listen_late``) and the wire
(``slow_body``, ``drop_connection``, ``server_error``, ``wrong_etag``): once armed, each answers

- ``describe()``: what it is;
- ``met``: whether it happened, and ``allow_miss``: whether it may not;
- ``effects``: what it did to which process, one ``Effect`` each (a member index and a pid
  where it acted on a fleet's process; none for a request on the wire);
- ``miss()``: why it missed, in words for a failure (None when it was met or may miss);
- ``lines()``: what it came to, for a fleet's summary;
- ``cause(index)``: what it did to member ``index``, for the reason that member failed.

Structural (``typing.Protocol``): the wire's faults (``remote.wire_faults``) answer it without
importing it, since ``remote`` sits below ``faults`` and may not import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Effect(Protocol):
    """What a fault did, to whom: read-only, so a frozen record of any family fits."""

    @property
    def member(self) -> int | None:
        """The index of the fleet member it acted on; None: no member (a request)."""

    @property
    def pid(self) -> int | None:
        """The process it acted on; None where none is known."""

    @property
    def what(self) -> str:
        """What it did, in a few words: ``its open of /cache/x failed with ESTALE``."""


@dataclass(frozen=True)
class FaultEffect:
    """An ``Effect`` on a process of a fleet."""

    member: int | None
    pid: int | None
    what: str


class MissFromWhy:
    """``miss()`` for an armed fault that says why it missed when asked (``why_missed``)."""

    @property
    def met(self) -> bool:
        raise NotImplementedError

    @property
    def allow_miss(self) -> bool:
        raise NotImplementedError

    def miss(self) -> str | None:
        """Why it proves nothing, for a failure; None when it was met or may miss."""
        if self.met or self.allow_miss:
            return None
        return self.why_missed()

    def why_missed(self) -> str:
        """Why it was never met (asked only when it was not)."""
        raise NotImplementedError


class ArmedFault(Protocol):
    """A fault given to a launch (or injected into the hub), once armed."""

    @property
    def met(self) -> bool: ...

    @property
    def allow_miss(self) -> bool: ...

    @property
    def effects(self) -> Sequence[Effect]: ...

    def describe(self) -> str: ...

    def miss(self) -> str | None:
        """Why it was never met, for a failure; None when it was met or may miss."""

    def lines(self) -> list[str]:
        """What it came to, one line each, for a summary."""

    def cause(self, index: int) -> str | None:
        """What it did to member ``index``, for the reason the member failed; None: nothing."""
