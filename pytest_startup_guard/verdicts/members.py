"""What every kind of case says of one member the same way: undecided, a late failure, ``expect``.

A member the machine never gave its time is *undecided*, whatever the case; a failure after the
readiness time-out (in the member's own time) is a late one; a user's ``expect`` that raises
rejects the member instead of breaking the check.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.outcomes import Problem


def exited_late(server: Server, fleet: Fleet) -> bool:
    """Whether a failed start-up failed only after the readiness time-out (its own time)."""
    return (server.own_seconds_to_exit or 0.0) >= fleet.timeout


def late_exit(server: Server, fleet: Fleet) -> str:
    return (
        f"server {server.index} failed only after the readiness time-out: it exited after"
        f" {server.own_seconds_to_exit:.2f} s of its own time, {fleet.timeout:g} s allowed"
    )


def undecided(server: Server) -> Problem:
    """A member the machine never gave its time: an undecided problem, not a failed one."""
    return Problem.undecided(f"server {server.index}: {server.reason}")


def supervisor_gave_up(server: Server) -> bool:
    """A member that exited 0 before it was ready after workers of it failed: a supervisor
    that gave up (uvicorn's exits 0), so its start-up failed, whatever its own exit code."""
    return server.state == "exited" and server.returncode == 0 and bool(server.failed_workers())


def resolved_path(path: str) -> str:
    """``path`` with every symlink on the way resolved but the last part (a hub pointer stays
    the pointer, not its blob), as the child runtime's reported paths are compared."""
    given = os.path.abspath(path.rstrip(os.sep) or os.sep)
    head, last = os.path.split(given)
    return os.path.join(os.path.realpath(head), last) if last else given


def accepts(expect: Callable[[Server], object], server: Server) -> bool:
    try:
        return bool(expect(server))
    except Exception:
        return False


__all__ = [
    "accepts",
    "exited_late",
    "late_exit",
    "resolved_path",
    "supervisor_gave_up",
    "undecided",
]
