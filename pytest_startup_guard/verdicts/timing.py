"""How long a race's windows were open, how long a process retried, and why a reader was not
hit: the words a transient verdict uses for time, said once.

Times are given as ``+t`` from a zero the caller names (a fleet's release), windows with their
length in milliseconds: ``window 1 opened at +0.012 s, closed at +0.034 s: open for 22 ms``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_startup_guard.races.armed import Window


@dataclass(frozen=True)
class Clock:
    """The zero of a message's times (monotonic seconds) and how it is said."""

    zero: float
    label: str  # "the fleet's release"

    def at(self, t: float) -> str:
        """``+0.312 s``."""
        return f"{t - self.zero:+.3f} s"

    def legend(self) -> str:
        return f"(times from {self.label})"


def window_words(windows: list[Window], index: int, clock: Clock) -> str:
    """``window 1 opened at +0.012 s, closed at +0.034 s: open for 22 ms`` (or still open)."""
    window = windows[index]
    opened = f"window {index + 1} opened at {clock.at(window.opened_t)}"
    if window.closed_t is None:
        return f"{opened}, still open when checked"
    return f"{opened}, closed at {clock.at(window.closed_t)}: open for {_ms(window.closed_t - window.opened_t)}"


def retry_words(
    pid: int,
    windows: list[Window],
    hit_windows: list[int],
    first_hit_t: float,
    end_t: float,
    end: str,
    clock: Clock,
    found: str = "",
) -> str:
    """What a process that met the race and did not start up did with its time: what it
    found (``Hit.found``: the change, in words), each window it met, how long it retried (its
    first hit to ``end_t``: ``end`` says what that is, "its exit" or "its last read of
    config.json") and whether it gave up inside a window."""
    met = "; ".join(window_words(windows, index, clock) for index in hit_windows)
    if found:
        met = f"{found} in {met}"
    retried = (
        f"it retried for {_seconds(max(0.0, end_t - first_hit_t))} (from its first hit at"
        f" {clock.at(first_hit_t)} to {end} at {clock.at(end_t)})"
    )
    last = windows[hit_windows[-1]] if hit_windows else None
    if last is not None and (last.closed_t is None or end_t < last.closed_t):
        verdict = (
            "it gave up while the window was still open: a start-up must retry for longer than"
            " the window stays open"
        )
    else:
        verdict = "the window had closed by then: what failed it came after the race"
    return f"pid {pid} met {met}; {retried}: {verdict} {clock.legend()}"


def unhit_reader_words(
    pid: int, who: str, filename: str, read_t: float, windows: list[Window], clock: Clock
) -> str:
    """Why a process that read the raced file was never hit: its read came before the window
    opened, after it closed, or no window ever opened."""
    before = [window for window in windows if window.opened_t <= read_t]
    if not windows:
        why = "and the window never opened"
    elif not before:
        why = f"before the window opened at {clock.at(windows[0].opened_t)}"
    elif before[-1].closed_t is not None and before[-1].closed_t < read_t:
        why = f"after the window closed at {clock.at(before[-1].closed_t)}"
    else:
        why = "while a window was open, but the race did not count the access as a hit"
    return (
        f"pid {pid} ({who}) read {filename} at {clock.at(read_t)}, {why}: the race never hit it,"
        " so surviving proves nothing for it (every process that reads the raced file must meet"
        f" the race; give the case the default trigger, on_access(), which opens at each process's first access of it) {clock.legend()}"
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 0.01 else f"{seconds * 1000:.0f} ms"


def _seconds(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 0.1 else f"{seconds:.2f} s"


__all__ = ["Clock", "retry_words", "unhit_reader_words", "window_words"]
