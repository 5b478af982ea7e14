"""When a race window opens and closes.

- ``on_access(nth=None, hold=None, accesses=None, op=None)`` (the default): right before each
  process's first access of what the race changes (``Race.raced_files``: the pointer a swap
  removes, the ref a rewrite empties, the blob cut short), wherever it comes in its start-up;
  with ``nth=N``, right before a process's Nth access (of operation ``op``, if given) under the
  race's folders, whatever it reads; deterministic. With no hold, it holds the window open for
  the race's modelled window (``Race.window``) plus ``WINDOW_MARGIN``.
- ``after(seconds, hold=0.5)``: a fixed time after the fleet is released, for processes the
  child runtime cannot see (non-Python servers, reads inside Rust extensions).
- ``chaos(gap=0.001, hold=0.0, seed=None)``: a refresher process runs the race in a loop, as a
  real refresher would, with seeded jitter, for the whole test.
- ``placed()``: the fault is in place from arming until teardown, as a persistent one is in
  production (the default of stale locks: nobody ever removes them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

# ``after(seconds, ...)`` has a parameter of that name: the check is ``_seconds`` here.
from pytest_startup_guard.checks import seconds as _seconds
from pytest_startup_guard.checks import whole_number
from pytest_startup_guard.errors import InvalidArgumentError
from pytest_startup_guard.runtime.operations import describe_ops, operation_events

# The default hold of ``on_access()`` is the race's window (``Race.window``: how long its real
# writer keeps the fault on disk, measured by benchmarks/bench_windows.py; 16 µs to 0.43 ms on
# a quiet machine) plus this margin. 20 ms covers the writer preempted between its operations on
# a loaded machine (the longest p99 beside 2x as many CPU-bound processes as cores: 16 ms) and
# the reader's own path from the access that opens the window to the one that meets the fault;
# it stays 5x under the first pause of a realistic retry (0.1 s), so a retry gets through and a
# single try does not.
WINDOW_MARGIN = 0.02
# The default hold of a race that models no window (``Race.window = None``: a race of a user's
# own that says nothing of its writer) and of ``after()``: the hold every trigger had before.
DEFAULT_HOLD = 0.5


def default_hold(window: float | None) -> float:
    """The hold of ``on_access()`` given no hold: ``window + WINDOW_MARGIN``, or
    ``DEFAULT_HOLD`` for a race that models no window."""
    return DEFAULT_HOLD if window is None else window + WINDOW_MARGIN


@dataclass(frozen=True)
class OnAccess:
    # None: each process's first access of what the race changes; N: its Nth access under the
    # race's folders, whatever file it is.
    nth: int | None = None
    hold: float | None = None  # None: the race's window + WINDOW_MARGIN, set when it is armed
    accesses: int | None = None
    max_hold: float = 30.0  # with ``accesses``: the window closes by then whatever happens
    # The audit events of the operations it waits for (``runtime/operations.py``); (): any.
    ops: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"nth={self.nth}"] if self.nth is not None else []
        if self.accesses is not None:
            parts.append(f"accesses={self.accesses}")
        elif self.hold is not None:
            parts.append(f"hold={self.hold:g}")
        if self.ops:
            parts.append(describe_ops(self.ops))
        return f"on_access({', '.join(parts)})"

    @property
    def at_change(self) -> bool:
        """It counts accesses of what the race changes (no ``nth``, no ``op``), not every
        access under the race's folders."""
        return self.nth is None and not self.ops

    def counts(self, op: str) -> bool:
        """Whether an access by operation ``op`` (an audit event) counts towards ``nth``."""
        return not self.ops or op in self.ops

    def for_window(self, window: float | None) -> OnAccess:
        """This trigger with its hold set: the race's ``window`` + ``WINDOW_MARGIN`` where none
        was given."""
        return self if self.hold is not None else replace(self, hold=default_hold(window))


@dataclass(frozen=True)
class After:
    seconds: float
    hold: float = DEFAULT_HOLD

    def describe(self) -> str:
        return f"after({self.seconds:g}, hold={self.hold:g})"


@dataclass(frozen=True)
class Chaos:
    gap: float = 0.001
    hold: float = 0.0
    seed: int | None = None

    def describe(self) -> str:
        seed = "" if self.seed is None else f", seed={self.seed}"
        return f"chaos(gap={self.gap:g}, hold={self.hold:g}{seed})"


@dataclass(frozen=True)
class Placed:
    def describe(self) -> str:
        return "placed()"


Trigger = OnAccess | After | Chaos | Placed


def on_access(
    nth: int | None = None,
    hold: float | None = None,
    accesses: int | None = None,
    op: str | Sequence[str] | None = None,
) -> OnAccess:
    """Open right before each process's first access of what the race changes (the pointer a
    swap removes, the ref a rewrite empties, the blob cut short: ``Race.raced_files``), wherever
    it comes in its start-up, so every process that reads it meets the change; with ``nth=N``,
    right before each process's Nth access under the race's folders (the repo's folder), whatever
    file it is (a place in the start-up, chosen by hand: only accesses of what the race changes
    while the window is open are hits). Close
    ``hold`` seconds of the triggering process's own time after the last process that triggered
    it or, with ``accesses=N``, once each triggering process has made N accesses of the cache
    inside the window, the triggering one included (any file under the cache root counts,
    ``HF_HOME/token`` too). With no ``hold``, the race's modelled window (``Race.window``, the
    time its real writer keeps the fault on disk) plus ``WINDOW_MARGIN`` (20 ms).

    ``op`` names the operation(s) it waits for: ``nth`` counts only those (``"rename"``:
    right before the process's nth rename or replace under the race's folders). Every file
    operation the child runtime sees is an access: ``runtime/operations.py`` lists them."""
    where = "on_access()"
    return OnAccess(
        nth=None if nth is None else whole_number("nth", nth, where, minimum=1),
        hold=None if hold is None else _seconds("hold", hold, where),
        accesses=None if accesses is None else whole_number("accesses", accesses, where, minimum=1),
        ops=() if op is None else operation_events(op, "op", where),
    )


def after(seconds: float, hold: float = DEFAULT_HOLD) -> After:
    """Open ``seconds`` after the fleet is released (or after arming, if no fleet is launched
    first); close ``hold`` seconds later."""
    where = "after()"
    return After(_seconds("seconds", seconds, where), _seconds("hold", hold, where, positive=True))


def chaos(gap: float = 0.001, hold: float = 0.0, seed: int | None = None) -> Chaos:
    """A refresher process that opens and closes the window in a loop for the whole test:
    windows of ``hold`` and gaps of ``gap`` seconds, each jittered by a seeded factor 0.5-1.5
    (``seed`` defaults to the test's seed, so a run seed replays the same refresher)."""
    where = "chaos()"
    checked_seed = None if seed is None else whole_number("seed", seed, where)
    return Chaos(
        _seconds("gap", gap, where, positive=True), _seconds("hold", hold, where), checked_seed
    )


def placed() -> Placed:
    """Put the fault in place now and leave it until teardown: one window for the whole test
    (every access of the target hits it)."""
    return Placed()


def checked_trigger(value: object, where: str) -> OnAccess | After | Chaos:
    """``value`` if it is a trigger a transient case can race with (``on_access(...)``,
    ``after(...)``, ``chaos(...)``); otherwise an error naming it, ``where`` it was given and
    what is accepted."""
    if isinstance(value, (OnAccess, After, Chaos)):
        return value
    why = (
        ": placed() leaves the fault for the whole test, which no start-up can survive"
        if isinstance(value, Placed)
        else ""
    )
    raise InvalidArgumentError(
        f"invalid trigger={value!r} for {where}{why}: expected on_access(...), after(...) or"
        " chaos(...) from pytest_startup_guard"
    )


def with_hold(trigger: Trigger | None, hold: float | None, where: str) -> Trigger | None:
    """``trigger`` with ``hold`` as its hold (``hold=`` of a ``startup_races`` marker): it fills
    the hold of an ``on_access()`` that gave none (no trigger: ``on_access(hold=hold)``); a
    trigger that has a hold of its own is an error, the hold being given twice."""
    if hold is None:
        return trigger
    if trigger is None:
        return OnAccess(hold=hold)
    if isinstance(trigger, OnAccess) and trigger.hold is None:
        return replace(trigger, hold=hold)
    raise InvalidArgumentError(
        f"hold={hold:g} and trigger={trigger.describe()} in {where} both set how long the window"
        " stays open: give the hold once, as hold= or inside the trigger"
    )
