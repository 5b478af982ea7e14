"""The start-up of a failed test in pytest-html's report, through pytest-html's extras API.

Where pytest-html is installed and ``--html`` is given, the report of a failed start-up test
carries one extra: the SVG timeline of its start-up (``svg.timeline_svg``), the output tail of
each server that did not become ready, and the replay command, all escaped as the HTML report
escapes (``svg.escape``: ``printable``, then the markup). pytest-html is imported only here,
only then: where it is absent, nothing is added and nothing is imported.
"""

from __future__ import annotations

from typing import Any

import pytest


def wanted(config: pytest.Config) -> bool:
    """Whether pytest-html is active in this run (installed, registered, and ``--html`` given)."""
    return bool(config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", None))


def add_extras(report: pytest.TestReport, facts: dict[str, Any], replay: str) -> None:
    """Append the start-up's extra to ``report.extras`` (the list pytest-html reads)."""
    from pytest_html import extras  # type: ignore[import-untyped]

    from pytest_startup_guard.report.svg import escape, timeline_svg

    parts = ['<div class="startup-guard">', "<h4>startup-guard: the start-up</h4>"]
    svg = timeline_svg(facts)
    if svg is not None:
        parts.append(svg)
    for number, fleet in enumerate(facts.get("fleets", []), 1):
        for server in fleet.get("servers", []):
            tail = server.get("output_tail")
            if not tail:
                continue
            state = ", ".join(
                escape(part) for part in (server.get("state"), server.get("reason")) if part
            )
            parts.append(
                f"<p>fleet {number}, server {escape(server['index'])} (pid"
                f" {escape(server['pid'])}): {state}</p><pre>{escape(tail)}</pre>"
            )
    parts.append(f"<p>replay: <code>{escape(replay)}</code></p></div>")
    # pytest-html reads the attribute ``extras`` that a makereport hook sets on the report
    setattr(report, "extras", [*getattr(report, "extras", []), extras.html("\n".join(parts))])  # noqa: B010
