"""A report's facts in words, the same in every view: the terminal summary, the HTML report and
the merged CI matrix. Standard library only (the merge command must start without pytest)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VERDICT_WORDS = {  # a case's kind: (as expected, not as expected)
    "transient": ("survived", "did not survive"),
    "corrupt": ("failed closed", "did not fail closed"),
    "stale": ("recovered or failed closed", "hung or failed unclearly on the stale lock"),
}


def seconds_text(value: object) -> str:
    """``1.23 s``, or ``-`` where there is no number."""
    return f"{value:.2f} s" if isinstance(value, (int, float)) else "-"


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
