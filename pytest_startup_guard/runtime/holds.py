"""How long the controller held each process at its accesses, and when each access went on.

A reported access waits for its reply; a "wait" answer makes the process sleep and ask again.
``AccessHolds`` counts that time per process (``blocked_seconds``: time the plugin took, which
a hold in the process's own time must not count) and notes when the access first reported was
told to go on (``answered_at``: its operation ran then, not when it was reported). The
controller calls it under its lock.
"""

from __future__ import annotations

import time

from pytest_startup_guard.runtime.events import AccessAnswer, AccessEvent


class AccessHolds:
    def __init__(self) -> None:
        # When each first-reported access (by id: the controller keeps it in ``accesses``) was
        # answered to go on.
        self._answered: dict[int, float] = {}
        self._asking: dict[int, AccessEvent] = {}  # pid -> its access waiting to go on
        self._waiting_since: dict[int, float] = {}  # pid -> when it was told to wait
        self._blocked: dict[int, float] = {}  # pid -> seconds its accesses waited for a reply

    def replied(self, event: AccessEvent, answer: AccessAnswer | None) -> None:
        """The process was held from ``event`` until the reply ``answer``, just sent: count it,
        and note when the access first reported goes on, with the last answer."""
        now = time.monotonic()
        asked = self._asking.pop(event.pid, None) if event.again else event
        if asked is not None and answer is not None and answer.wait:
            self._asking[event.pid] = asked
        elif asked is not None:
            self._answered[id(asked)] = now
        # Asked again after a "wait": held since that answer, its sleep included.
        since = self._waiting_since.pop(event.pid, None) if event.again else None
        waited = max(0.0, now - (event.t if since is None else min(since, event.t)))
        self._blocked[event.pid] = self._blocked.get(event.pid, 0.0) + waited
        if answer is not None and answer.wait:
            self._waiting_since[event.pid] = now

    def answered_at(self, access: AccessEvent) -> float:
        return self._answered.get(id(access), access.t)

    def blocked_seconds(self, pid: int) -> float:
        return self._blocked.get(pid, 0.0)


__all__ = ["AccessHolds"]
