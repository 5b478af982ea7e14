"""What every kind of case says of one member the same way: undecided, a late failure, ``expect``.

A member the machine never gave its time is *undecided*, whatever the case; a failure after the
readiness time-out (in the member's own time) is a late one; a user's ``expect`` that raises
rejects the member instead of breaking the check.
"""

from __future__ import annotations

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


def accepts(expect: Callable[[Server], object], server: Server) -> bool:
    try:
        return bool(expect(server))
    except Exception:
        return False


__all__ = ["accepts", "exited_late", "late_exit", "undecided"]
