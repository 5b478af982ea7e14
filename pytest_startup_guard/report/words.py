"""A report's facts in words, the same in every view: the terminal summary, the HTML report, the
timelines and the merged CI matrix; a view says a fact with these, never with words of its own.
Standard library only, and the package's shared ``wording`` (the merge command must start
without pytest)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_startup_guard.outcomes import INFERRED, Outcome
from pytest_startup_guard.outcomes import OUTCOMES as STARTUP_OUTCOMES
from pytest_startup_guard.verdicts.kinds import WORDS
from pytest_startup_guard.wording import count, signal_name

__all__ = [
    "EXPECTED_WORDS",
    "EXPLORATION_OUTCOMES",
    "OUTCOMES",
    "VERDICT_WORDS",
    "count",
    "exploration_words",
    "explorations_words",
    "failed_workers_words",
    "outcome_counts",
    "races_words",
    "ready_words",
    "seconds_text",
    "server_problems",
    "signal_name",
    "verdict_words",
    "who",
    "worker_end",
    "worker_end_mark",
    "worker_words",
]

# A test's outcomes, in the order a count of them is said: ``3 passed, 2 failed``.
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")

# A case's kind, and what it was expected to do: (as expected, not as expected).
# Keyed by plain strings: a report's ``kind`` and ``expected`` are read back from JSON.
VERDICT_WORDS: dict[str, tuple[str, str]] = {
    kind: (words.done, words.missed) for kind, words in WORDS.items()
}
EXPECTED_WORDS: dict[str, tuple[str, str]] = {
    words.expected: (words.done, words.missed) for words in WORDS.values()
}


# An exploration's outcomes: the report's field for each (``not_reached``), and its words.
EXPLORATION_OUTCOMES: tuple[tuple[str, Outcome], ...] = tuple(
    (outcome.replace(" ", "_"), outcome) for outcome in STARTUP_OUTCOMES
)


def seconds_text(value: object, digits: int = 2) -> str:
    """``1.23 s`` (``digits`` decimals, never ``-0.00 s``), or ``-`` where there is no number."""
    if value.__class__ is bool or not isinstance(value, (int, float)):
        return "-"
    text = f"{value:.{digits}f}"
    if text[0] == "-" and not text.strip("-0."):  # a tiny negative number rounds to -0.00
        text = text[1:]
    return text + " s"


def who(pid: object, member: object) -> str:
    """``pid 7942 (server 0)``; ``pid 7942`` for a process of no member."""
    return f"pid {pid}" + (f" ({member})" if member else "")


def outcome_counts(counts: Mapping[str, Any], words: Iterable[str]) -> str:
    """``3 passed, 2 failed``: each of ``words`` that ``counts`` holds a number of, in order."""
    return ", ".join(f"{counts[word]} {word}" for word in words if counts.get(word))


def races_words(races: Iterable[Mapping[str, Any]]) -> str:
    """``2 races armed, 2 windows, 5 hits``: the races of a run, or of a test."""
    armed = list(races)
    return (
        f"{count(len(armed), 'race')} armed,"
        f" {count(sum(int(r.get('windows_total') or 0) for r in armed), 'window')},"
        f" {count(sum(int(r.get('hits_total') or 0) for r in armed), 'hit')}"
    )


def _points_words(points: int, outcomes: Mapping[str, int]) -> str:
    """``3 points: 2 survived, 1 not reached``: every outcome that a point had."""
    counts = ", ".join(
        f"{outcomes[field]} {words}" for field, words in EXPLORATION_OUTCOMES if outcomes[field]
    )
    return count(points, "point") + (f": {counts}" if counts else "")


def _outcomes(exploration: Mapping[str, Any]) -> dict[str, int]:
    return {field: int(exploration.get(field) or 0) for field, _ in EXPLORATION_OUTCOMES}


def exploration_words(exploration: Mapping[str, Any]) -> str:
    """``explored pointer_swap on config.json of acme/tiny (parallel): 3 points: 2 survived,
    1 not reached``: one entry of a test's ``explorations[]``, every outcome it had."""
    mode = exploration.get("mode")
    points = int(exploration.get("points") or 0)
    run = exploration.get("explored")
    inferred = points - int(run) if isinstance(run, int) and run < points else 0
    listed = [
        f"#{point.get('number', '?')} as #{point.get('from', '?')}"
        for point in exploration.get("inferred_points") or []
    ]
    return (
        f"explored {exploration.get('race', '?')} on {exploration.get('target', '?')}"
        + (f" ({mode})" if mode else "")
        + ": "
        + _points_words(points, _outcomes(exploration))
        + (f" ({run} run, {inferred} {INFERRED}" if inferred else "")
        + (f": {', '.join(listed)})" if inferred and listed else ")" if inferred else "")
    )


def explorations_words(explorations: Iterable[Mapping[str, Any]]) -> str:
    """``2 explorations: 5 points: 4 survived, 1 not reached``: the explorations of a run."""
    every = list(explorations)
    totals = {field: 0 for field, _ in EXPLORATION_OUTCOMES}
    for exploration in every:
        for field, number in _outcomes(exploration).items():
            totals[field] += number
    points = sum(int(exploration.get("points") or 0) for exploration in every)
    return f"{count(len(every), 'exploration')}: {_points_words(points, totals)}"


def verdict_words(verdict: Mapping[str, Any] | None) -> str:
    """``survived``, ``failed closed``, ``did not survive``, ``undecided ...``; "" without one."""
    if not verdict:
        return ""
    if verdict.get("undecided"):
        return "undecided: the machine was too slow to decide"
    if not verdict.get("checked"):
        return "verdict never checked"
    done, missed = VERDICT_WORDS.get(str(verdict.get("kind")), ("as expected", "not as expected"))
    return done if verdict.get("passed") else missed


def ready_words(ttr: Mapping[str, Any] | None) -> str:
    """``2 of 2 ready (median 0.62 s, worst 0.70 s)``; "" for a test without a fleet."""
    if not ttr:
        return ""
    text = f"{ttr.get('ready', 0)} of {ttr.get('servers', 0)} ready"
    if ttr.get("ready"):
        text += (
            f" (median {seconds_text(ttr.get('median'))}, worst {seconds_text(ttr.get('worst'))})"
        )
    return text


# -- workers: the processes under a fleet member (a server's ``workers[]``) --------------------


def _code(worker: Mapping[str, Any]) -> int | None:
    code = worker.get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def worker_end(worker: Mapping[str, Any]) -> str:
    """How a worker ended: ``exited with code 3``, ``killed by SIGKILL``, ``ended without a
    word`` (no exit status reached the plugin), ``running``."""
    if worker.get("ended") is None:
        return "running"
    code = _code(worker)
    if code is None:
        return "ended without a word"
    if code < 0:
        return f"killed by {signal_name(-code)}"
    return f"exited with code {code}"


def worker_end_mark(worker: Mapping[str, Any]) -> str:
    """The few characters a timeline's end mark shows: ``code 3``, ``SIGKILL``, ``no word``."""
    code = _code(worker)
    if code is None:
        return "no word"
    return signal_name(-code) if code < 0 else f"code {code}"


def worker_words(worker: Mapping[str, Any]) -> str:
    """``worker pid 123 exited with code 3 (OSError: ... config.json)``."""
    text = f"{worker.get('role') or 'worker'} pid {worker.get('pid', '?')} {worker_end(worker)}"
    cause = worker.get("cause")
    return text + (f" ({cause})" if cause else "")


def server_problems(server: Mapping[str, Any]) -> list[str]:
    """What failed in a server beyond its state, a line each: ``was ready, then exited with code
    3 0.52 s later``, then each failed worker (``worker pid 123 exited with code 3 (OSError:
    ...)``); none for a server that started up."""
    problems = []
    died = server.get("died_after_ready")
    if died is not None:
        problems.append(
            f"was ready, then exited with code {server.get('returncode')}"
            f" {seconds_text(died)} later"
        )
    problems += [worker_words(w) for w in server.get("workers") or [] if w.get("failed")]
    return problems


def failed_workers_words(servers: Iterable[Mapping[str, Any]]) -> str:
    """``2 workers failed`` over ``servers`` (a report's servers); "" where none failed."""
    failed = sum(1 for s in servers for w in s.get("workers") or [] if w.get("failed"))
    return f"{count(failed, 'worker')} failed" if failed else ""
