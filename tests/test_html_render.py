"""The HTML report and its SVG timeline (``report/html.py``, ``report/svg.py``), read back.

The real ones are rendered from JSON reports that ``pytest -p startup_guard`` wrote for small
fleets of ``examples/servers/config_server.py`` (a naive server a race kills, a server that hangs
on a corrupt config, a server whose output is markup); the rest from hand-made report entries
(caps, row order, a window still open). Pages are read with the standard library's
``html.parser`` into a small tree, and checked as a browser would find them: by the classes and
data attributes ``svg.py`` documents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_startup_guard.report import svg
from pytest_startup_guard.report import timeline as text_timeline
from pytest_startup_guard.report.html import anchor, page, report_html

ROOT = Path(__file__).resolve().parent.parent
CONFIG_SERVER = ROOT / "examples" / "servers" / "config_server.py"

HEAD = f"""
import sys
from pytest_startup_guard import on_access, ready

CONFIG = {{"config.json": {{"model_type": "gpt2"}}}}

def config_server(policy):
    return [sys.executable, {str(CONFIG_SERVER)!r}, "--model", "acme/tiny", "--port", "{{port}}",
            "--loader", "hub_json", "--policy", policy]
"""

# -- reading a page back -------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self) -> Iterator[Node]:
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.walk()

    def all(self, tag: str | None = None, cls: str | None = None, **data: str) -> list[Node]:
        """Descendants by tag, class and ``data-*`` attributes (``data_kind="server"``)."""
        return [
            node
            for node in self.walk()
            if (tag is None or node.tag == tag)
            and (cls is None or cls in node.classes)
            and all(node.attrs.get(k.replace("_", "-")) == v for k, v in data.items())
        ]

    def title(self) -> str:
        """The hover text: the text of the node's own ``<title>`` child."""
        titles = [c for c in self.children if isinstance(c, Node) and c.tag == "title"]
        assert len(titles) == 1, f"<{self.tag} class={self.classes}> has {len(titles)} <title>"
        return titles[0].text()


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        assert tag not in VOID, f"</{tag}>"
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(markup: str) -> Node:
    """The page as a tree; every element closed where it was opened, or the test fails."""
    builder = _TreeBuilder()
    builder.feed(markup)
    builder.close()
    assert builder.stack == [builder.root], f"unclosed: {[n.tag for n in builder.stack[1:]]}"
    return builder.root


def assert_self_contained(markup: str) -> Node:
    """No script, nothing fetched: no ``src``, every ``href`` an anchor of this page."""
    root = parse(markup)
    assert markup.startswith("<!DOCTYPE html>")
    tags = {node.tag for node in root.walk()}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "image", "use"}
    ids = {node.attrs["id"] for node in root.walk() if "id" in node.attrs}
    for node in root.walk():
        assert "src" not in node.attrs and "xlink:href" not in node.attrs, node
        assert not any(name.startswith("on") for name in node.attrs), node  # no handlers
        if "href" in node.attrs:
            href = node.attrs["href"]
            assert href.startswith("#") and href[1:] in ids, f"href {href!r} leaves the page"
    (style,) = root.all("style")
    assert "url(" not in style.text() and "@import" not in style.text()
    (csp,) = root.all("meta", http_equiv="Content-Security-Policy")
    assert "default-src 'none'" in csp.attrs["content"] and "script" not in csp.attrs["content"]
    return root


# -- running real fleets -------------------------------------------------------------------------


def run_report(pytester: pytest.Pytester, source: str, **outcomes: int) -> dict[str, Any]:
    """The JSON report of one inner run of ``source`` (a test file), which had ``outcomes``."""
    pytester.makepyfile(test_startup=HEAD + source)
    path = pytester.path / "report.json"
    result = pytester.runpytest_subprocess("-p", "startup_guard", f"--startup-guard-report={path}")
    result.assert_outcomes(**outcomes)
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def section_of(root: Node, test: dict[str, Any]) -> Node:
    (section,) = [n for n in root.all("section") if n.attrs.get("id") == anchor(test["nodeid"])]
    return section


def timeline_of(section: Node) -> Node:
    (timeline,) = section.all("svg", "sg-timeline")
    return timeline


SECONDS = re.compile(r"\d+\.\d{3} s")


def test_a_naive_fleet_that_a_race_killed_shows_its_exits_and_hits(
    guard_pytester: pytest.Pytester,
) -> None:
    document = run_report(
        guard_pytester,
        """
def test_naive(hub_cache, hub_race, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    hub_race.arm("pointer_swap", repo, "config.json", trigger=on_access(hold=0.5))
    server_fleet.launch(
        config_server("naive"), count=2, timeout=20, ready=ready.http("/health")
    ).assert_all_ready()
""",
        failed=1,
    )
    (test,) = document["tests"]
    (race,) = test["races"]
    (fleet,) = test["fleets"]
    assert [s["state"] for s in fleet["servers"]] == ["exited", "exited"]
    assert race["hits"], "the race hit no server: nothing to check"
    root = assert_self_contained(report_html(document))
    section = section_of(root, test)
    assert "sg-test-failed" in section.classes
    timeline = timeline_of(section)
    servers = timeline.all("g", "sg-row", data_kind="server")
    assert [row.attrs["data-label"] for row in servers] == ["server 0", "server 1"]
    assert len(timeline.all("g", "sg-row", data_kind="race")) == 1
    for row, server in zip(servers, fleet["servers"], strict=True):
        assert row.attrs["data-pid"] == str(server["pid"])
        (exited,) = row.all("g", "sg-exit")
        assert "exited" in exited.title() and "code 1" in exited.title()
        assert SECONDS.search(exited.title())
        assert not row.all("g", "sg-ready") and not row.all("g", "sg-hang")
        assert "sg-mark" in exited.classes
    # Every hit of the report is on its process's row, saying pid, operation, path and time.
    for hit in race["hits"]:
        (row,) = timeline.all("g", "sg-row", data_pid=str(hit["pid"]))
        marks = row.all("g", "sg-hit", data_path=hit["path"])
        assert marks and all("sg-mark" in mark.classes for mark in marks)
        tip = marks[0].title()
        assert f"pid {hit['pid']}" in tip and hit["path"] in tip and hit["op"] in tip
        assert SECONDS.search(tip)
    assert len(timeline.all("g", "sg-hit")) == race["hits_total"]
    (band,) = timeline.all("rect", "sg-window")
    assert "pointer_swap" in band.title() and race["target"] in band.title()
    (release,) = timeline.all("g", "sg-release")
    assert release.attrs["data-t"] == "0"  # the axis counts from the release
    # The table links the failed test to its section, marked failed.
    (row,) = root.all("tr", "sg-test-row")
    (cell,) = row.all("td", "sg-failed")
    assert cell.text() == "FAILED"
    assert "server failed to start" in section.text()  # the servers' output tails
    assert test["replay"] in section.text()


def test_a_hung_server_has_a_hang_mark_at_its_time_out(guard_pytester: pytest.Pytester) -> None:
    document = run_report(
        guard_pytester,
        """
def test_hangs(hub_cache, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    hub_cache.corrupt(repo, "config.json", "empty")
    server_fleet.launch(
        config_server("slow_retry"), count=2, timeout=1, ready=ready.http("/health")
    ).assert_all_ready()
""",
        failed=1,
    )
    (test,) = document["tests"]
    (fleet,) = test["fleets"]
    assert [s["state"] for s in fleet["servers"]] == ["hung", "hung"]
    section = section_of(assert_self_contained(report_html(document)), test)
    timeline = timeline_of(section)
    assert not timeline.all("g", "sg-row", data_kind="race")
    servers = timeline.all("g", "sg-row", data_kind="server")
    assert len(servers) == 2
    for row, server in zip(servers, fleet["servers"], strict=True):
        (hung,) = row.all("g", "sg-hang")
        assert "hung" in hung.title() and SECONDS.search(hung.title())
        assert float(hung.attrs["data-t"]) == pytest.approx(server["seconds_to_timeout"], abs=1e-3)
        assert not row.all("g", "sg-exit") and not row.all("g", "sg-hit")
        assert len(row.all("line", "sg-run")) == 1
    assert "still waiting for the config of acme/tiny" in section.text()
    assert "empty" in section.all("ul", "sg-corruptions")[0].text()


MARKUP = "<script>alert(1)</script> & <b>bold</b>"


def test_output_that_is_markup_is_shown_as_text(guard_pytester: pytest.Pytester) -> None:
    document = run_report(
        guard_pytester,
        f"""
CODE = "import sys; print({MARKUP!r}, flush=True); sys.exit(3)"

def test_markup(server_fleet):
    server_fleet.launch(
        [sys.executable, "-c", CODE, "{{port}}"], count=1, timeout=20, ready=ready.http("/")
    ).assert_all_ready()
""",
        failed=1,
    )
    (test,) = document["tests"]
    assert MARKUP in test["fleets"][0]["servers"][0]["output_tail"]
    markup = report_html(document)
    root = assert_self_contained(markup)  # no <script> element, in particular
    (output,) = section_of(root, test).all("details", "sg-output")
    assert MARKUP in output.text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in markup
    assert "bold" not in "".join(b.text() for b in root.all("b"))


# -- hand-made report entries --------------------------------------------------------------------


def server(index: int, pid: int, state: str, **seconds: float) -> dict[str, Any]:
    return {
        "index": index,
        "pid": pid,
        "state": state,
        "ready": state == "ready",
        "returncode": 1 if state == "exited" else None,
        "reason": "",
        "seconds_to_ready": seconds.get("ready"),
        "seconds_to_exit": seconds.get("exit"),
        "seconds_to_timeout": seconds.get("timeout"),
    }


def race(
    name: str, windows: list[tuple[float, float | None]], hits: list[tuple[int, float]]
) -> dict[str, Any]:
    return {
        "name": name,
        "target": f"config.json of acme/{name}@main",
        "trigger": "on_access(nth=1, hold=0.5)",
        "windows_total": len(windows),
        "windows": [
            {"opened": o, "closed": c, "opened_by": None, "member": None} for o, c in windows
        ],
        "hits_total": len(hits),
        "hits": [
            {"pid": pid, "member": None, "op": "open", "path": "refs/main", "t": t, "window": 0}
            for pid, t in hits
        ],
        "hits_per_process": [],
    }


def process(pid: int, member: str | None, hello: float) -> dict[str, Any]:
    return {
        "pid": pid,
        "ppid": 1,
        "member": member,
        "argv": ["python"],
        "hello": hello,
        "gone": None,
    }


def drawn(test: dict[str, Any]) -> Node:
    markup = svg.timeline_svg(test)
    assert markup is not None
    (timeline,) = parse(markup).all("svg", "sg-timeline")
    return timeline


def test_nothing_to_draw_is_none_and_a_fleet_alone_is_drawn() -> None:
    assert svg.timeline_svg({"races": [], "fleets": [], "processes": []}) is None
    assert svg.timeline_svg({"nodeid": "t.py::t"}) is None
    fleet = {"released": 0.5, "servers": [server(0, 10, "ready", ready=0.25)]}
    timeline = drawn({"races": [], "fleets": [fleet], "processes": []})
    (row,) = timeline.all("g", "sg-row")
    (ready,) = row.all("g", "sg-ready")
    assert ready.attrs["data-t"] == "0.25" and "ready" in ready.title()


def test_rows_follow_the_text_timeline_and_every_state_has_its_mark() -> None:
    fleets = [
        {
            "released": 1.0,
            "servers": [
                server(0, 100, "ready", ready=0.5),
                server(1, 101, "undecided", timeout=2.0),
            ],
        },
        {"released": 1.5, "servers": [server(0, 200, "exited", exit=0.2)]},
    ]
    test = {
        "races": [race("pointer_swap", [(1.1, 1.3)], [(7, 1.2), (102, 1.25)])],
        "fleets": fleets,
        "processes": [
            process(100, "fleet 1 server 0", 0.9),
            process(101, "fleet 1 server 1", 0.9),
            process(102, "fleet 1 server 0", 1.05),  # a descendant of server 0
            process(200, "fleet 2 server 0", 1.4),
            process(5, None, 1.0),  # a stray
        ],
    }
    timeline = drawn(test)
    labels = [row.attrs["data-label"] for row in timeline.all("g", "sg-row")]
    assert labels == [
        "race pointer_swap",
        "fleet 1 server 0",
        "fleet 1 server 0 child",
        "fleet 1 server 1",
        "fleet 2 server 0",
        "pid 5",
        "pid 7",  # a process with hits that never said hello (the test process's place)
    ]
    assert [m.attrs["data-fleet"] for m in timeline.all("g", "sg-release")] == ["1", "2"]
    assert timeline.attrs["data-zero"] == "1"  # the release of the first fleet
    (undecided,) = timeline.all("g", "sg-undecided")
    assert undecided.attrs["data-t"] == "2" and "undecided" in undecided.title()
    (exited,) = timeline.all("g", "sg-exit")
    assert exited.attrs["data-t"] == "0.7"  # fleet 2's seconds count from its own release
    (child,) = timeline.all("g", "sg-row", data_label="fleet 1 server 0 child")
    (hit,) = child.all("g", "sg-hit")
    assert hit.attrs["data-pid"] == "102" and "pid 102" in hit.title()
    assert [t.attrs["data-seconds"] for t in timeline.all("g", "sg-tick")][:1] != []


def test_the_text_timeline_draws_the_same_rows_on_the_same_zero() -> None:
    """Both timelines come from ``rows.timeline_rows``: one zero, one row order; the text one
    also shows the accesses that hit nothing (``accesses[]``)."""
    test = {
        "races": [race("pointer_swap", [(1.1, None)], [(7, 1.2), (102, 1.25)])],
        "fleets": [{"released": 1.0, "servers": [server(0, 100, "exited", exit=0.5)]}],
        "processes": [
            process(100, "server 0", 0.9),
            process(102, "server 0", 1.05),  # a descendant of server 0
            process(5, None, 1.0),  # a stray that never touched the cache
        ],
        "accesses": [
            {"pid": 7, "member": "test", "op": "open", "t": 1.05},
            {"pid": 7, "member": "test", "op": "os.listdir", "t": 1.15},
            {"pid": 7, "member": "test", "op": "open", "t": 1.2},  # the hit
            {"pid": 102, "member": "server 0", "op": "open", "t": 1.25},  # the hit
        ],
    }
    text = text_timeline.timeline_of(test)
    assert text is not None
    lines = text.splitlines()
    picture = drawn(test)
    assert lines[0].startswith("timeline: 0 = release of the fleet; ")
    (title,) = picture.all("text", "sg-title")
    assert title.text().startswith("timeline: 0 = release of the fleet; ")
    assert picture.attrs["data-zero"] == "1"
    labels = [
        "".join(c for c in row.all("text", "sg-label")[0].children if isinstance(c, str))
        for row in picture.all("g", "sg-row")
    ]
    assert labels == [
        "race pointer_swap",
        "server 0 pid 100",
        "  child pid 102",
        "pid 5",
        "test pid 7",
    ]
    assert [line.split("|")[0].rstrip() for line in lines[3:8]] == labels
    cells = {label: line.split("|", 1)[1] for label, line in zip(labels, lines[3:8], strict=True)}
    assert cells["race pointer_swap"].rstrip().endswith("#")  # still open: to the last event
    assert cells["server 0 pid 100"].rstrip().endswith("X")
    assert cells["test pid 7"].strip().startswith("o") and "l" in cells["test pid 7"]
    assert cells["test pid 7"].rstrip().endswith("*") and "*" in cells["  child pid 102"]
    assert len(picture.all("g", "sg-hit")) == 2  # the picture shows the hits only


def test_a_window_still_open_runs_to_the_end() -> None:
    test = {
        "races": [race("ref_rewrite", [(0.1, 0.2), (0.3, None)], [(9, 0.8)])],
        "fleets": [],
        "processes": [
            {"pid": 9, "ppid": 1, "member": "test", "argv": [], "hello": 0.0, "gone": None}
        ],
    }
    timeline = drawn(test)
    closed, still_open = timeline.all("rect", "sg-window")
    assert (closed.attrs["data-open"], still_open.attrs["data-open"]) == ("0", "1")
    right = float(still_open.attrs["x"]) + float(still_open.attrs["width"])
    assert right == pytest.approx(svg.PLOT_RIGHT, abs=0.2)
    assert "still open" in still_open.title()
    assert float(closed.attrs["x"]) + float(closed.attrs["width"]) < right / 2
    (row,) = timeline.all("g", "sg-row", data_label="test")
    assert row.all("g", "sg-hit")


def test_a_chaos_run_is_capped_and_says_what_it_did_not_draw() -> None:
    servers = [server(i, 1000 + i, "ready", ready=0.1) for i in range(40)]
    hits = [(1000 + i % 40, 0.01 * i) for i in range(300)]
    races = [race(f"race{n}", [(0.0, 0.01)] * 100, hits) for n in range(10)]
    test = {"races": races, "fleets": [{"released": 0.0, "servers": servers}], "processes": []}
    timeline = drawn(test)
    assert len(timeline.all("g", "sg-row", data_kind="race")) == svg.MAX_RACE_ROWS
    assert len(timeline.all("g", "sg-row", data_kind="server")) == svg.MAX_PROCESS_ROWS
    # Windows and hits closer than the picture can show apart are drawn as one, with a count.
    windows = timeline.all("rect", "sg-window")
    assert len(windows) < svg.MAX_WINDOWS
    assert sum(int(w.attrs["data-windows"]) for w in windows) == svg.MAX_WINDOWS
    hit_marks = timeline.all("g", "sg-hit")
    placed = sum(int(h.attrs["data-count"]) for h in hit_marks)
    assert len(hit_marks) < placed <= svg.MAX_HITS
    notes = {note.attrs["data-what"]: note for note in timeline.all("text", "sg-note")}
    assert set(notes) == {"races", "processes", "windows", "hits"}
    assert (
        notes["races"].attrs["data-count"] == "2" and notes["processes"].attrs["data-count"] == "10"
    )
    assert notes["windows"].attrs["data-count"] == str(8 * 100 - svg.MAX_WINDOWS)
    assert notes["hits"].attrs["data-count"] == str(10 * 300 - placed)
    assert all(re.fullmatch(r"\d+ more \w+ not drawn.*", n.text()) for n in notes.values())
    assert len(svg.timeline_svg(test) or "") < 200_000


def test_markup_in_the_facts_stays_text_in_the_svg() -> None:
    test = {"races": [race("<b>x</b>", [(0.0, 1.0)], [])], "fleets": [], "processes": []}
    test["races"][0]["hits"] = [
        {
            "pid": 3,
            "member": "test",
            "op": "open",
            "path": "a<&>\x1b[0m.json",
            "t": 0.5,
            "window": 0,
        }
    ]
    timeline = drawn(test)
    assert not timeline.all("b")
    (hit,) = timeline.all("g", "sg-hit")
    assert "a<&>\\x1b[0m.json" in hit.title()  # the escape character made visible


def test_the_page_shell_has_no_script_and_the_classes_other_views_use() -> None:
    markup = page("a <b> & c", '<table class="sg-table"><tr><td>x</td></tr></table>')
    root = assert_self_contained(markup)
    (title,) = root.all("title")
    assert title.text() == "a <b> & c"
    assert root.all("meta", charset="utf-8") and root.all("meta", name="viewport")
    css = root.all("style")[0].text()
    for selector in (
        "table.sg-table",
        "td.sg-passed",
        "td.sg-failed",
        "td.sg-missing",
        "tr.sg-only-one-target",
    ):
        assert selector in css, selector
    failed_rule = re.search(r"td\.sg-failed \{([^}]*)\}", css)
    assert failed_rule and "background: #d1242f" in failed_rule.group(1)


def test_failed_tests_come_first_each_linked_to_its_section() -> None:
    def entry(nodeid: str, outcome: str, **extra: Any) -> dict[str, Any]:
        return {
            "nodeid": nodeid,
            "outcome": outcome,
            "seed": 1,
            "replay": f"pytest {nodeid}",
            "reruns": 0,
            "attempts": [],
            "hidden_failure": None,
            "verdict": None,
            "races": [],
            "fleets": [],
            "processes": [],
            "time_to_ready": None,
            **extra,
        }

    tests = [
        entry("t.py::test_green", "passed"),
        entry(
            "t.py::test_hid",
            "passed",
            hidden_failure={"attempt": 0, "phase": "call", "failure": "E"},
        ),
        entry("t.py::test_red[<x>]", "failed"),
    ]
    document = {
        "target": "cpu",
        "seed": 1,
        "exit_status": 1,
        "versions": {},
        "totals": {},
        "tests": tests,
    }
    root = assert_self_contained(report_html(document))
    rows = root.all("tr", "sg-test-row")
    assert [row.all("code")[0].text() for row in rows] == [
        "t.py::test_red[<x>]",
        "t.py::test_hid",
        "t.py::test_green",
    ]
    assert rows[0].all("td", "sg-failed") and rows[2].all("td", "sg-passed")
    assert "HIDDEN FAILURE" in rows[1].text()
    sections = [n.attrs["id"] for n in root.all("section", "sg-test")]
    assert sections == [row.all("a")[0].attrs["href"][1:] for row in rows]


# -- workers: every process that starts up is judged ----------------------------------------------

CAUSE = """OSError: config.json of acme/tiny is <stale> & "unusable" (worker 1)"""


def worker(pid: int, ended: float | None, code: int | None, *, failed: bool, **extra: Any) -> Any:
    return {
        "pid": pid, "ppid": 100, "role": "worker", "started": 0.95, "startup_work": True,
        "ended": ended, "exit_code": code, "known_from": "reaped" if code is not None else "",
        "cause": None, "failed": failed, **extra,
    }  # fmt: skip


def workers_test() -> dict[str, Any]:
    """A ready supervisor (pid 100) and its workers: one failed (code 3, a cause with markup),
    one killed without a word (failed too), one the fleet's stop ended (long after the rest),
    one that did no start-up work and exited 0, one still running."""
    workers = [
        worker(101, 1.4, 3, failed=True, cause=CAUSE),
        worker(102, 1.6, None, failed=True),
        worker(103, 9.0, -15, failed=False),
        worker(104, 1.2, 0, failed=False, startup_work=False),
        worker(105, None, None, failed=False),
    ]
    member = {**server(0, 100, "ready", ready=0.8), "started_up": False, "workers": workers}
    return {
        "races": [],
        "fleets": [{"released": 1.0, "stopped": 8.0, "servers": [member]}],
        "processes": [process(100, "server 0", 0.9)]
        + [process(pid, "server 0", 0.95) for pid in range(101, 106)],
    }


def test_each_worker_row_ends_with_the_mark_of_its_end() -> None:
    test = workers_test()
    timeline = drawn(test)
    rows = {row.attrs.get("data-pid"): row for row in timeline.all("g", "sg-row")}
    assert [row.attrs["data-label"] for row in timeline.all("g", "sg-row")] == [
        "server 0", *["server 0 child"] * 5,
    ]  # fmt: skip
    ends = {pid: rows[pid].all("g", "sg-end") for pid in rows}
    assert ends["100"] == [] and ends["105"] == []  # the member (its own marks), one running
    (failed,) = ends["101"]
    assert "sg-mark" in failed.classes and "sg-end-failed" in failed.classes
    assert (failed.attrs["data-end"], failed.attrs["data-code"]) == ("failed", "3")
    assert failed.attrs["data-t"] == "0.4"  # on the axis: from the release
    assert failed.title().startswith("failed: worker pid 101 (server 0) exited with code 3 at ")
    assert failed.title().endswith(f"; cause: {CAUSE}")  # markup read back as text
    (label,) = failed.all("text", "sg-end-label")
    assert label.text() == "code 3"
    (badge,) = failed.all("rect")
    assert badge.attrs["fill"] == svg.EXIT  # a failure is drawn red, as an exit is
    (silent,) = ends["102"]
    assert "sg-end-failed" in silent.classes and silent.attrs["data-code"] == ""
    assert silent.all("text", "sg-end-label")[0].text() == "no word"
    assert "ended without a word" in silent.title()
    (stopped,) = ends["103"]
    assert "sg-end-stopped" in stopped.classes and "sg-end-failed" not in stopped.classes
    assert stopped.all("text", "sg-end-label")[0].text() == "SIGTERM"
    assert "when its fleet was stopped" in stopped.title() and "8.000 s" in stopped.title()
    assert not stopped.all("rect")  # not drawn as a failure
    # The stop came long after: its mark is at the end, which the stop does not stretch.
    assert float(stopped.attrs["data-t"]) == pytest.approx(0.8)  # the ready mark, the last event
    (helper,) = ends["104"]
    assert "sg-end-ended" in helper.classes and "not judged" in helper.title()
    # Each ended worker's run stops at its end mark.
    (run,) = rows["101"].all("line", "sg-run")
    (mark_x,) = {float(t.attrs["x"]) for t in failed.all("rect")}
    assert float(run.attrs["x2"]) == pytest.approx(mark_x + 7, abs=0.2)
    legend = timeline.all("g", "sg-legend")[0].text()
    assert "worker failed" in legend and "worker stopped with its fleet" in legend
    # The text timeline: the same rows, each worker's ending in its letter.
    text = text_timeline.timeline_of(test)
    assert text is not None
    cells = [line.split("|", 1)[1].rstrip() for line in text.splitlines() if "child pid" in line]
    assert [cell[-1] for cell in cells] == ["F", "F", "S", "E", "-"]
    assert "F worker failed" in text


def test_the_cause_of_a_worker_stays_text_and_the_legend_is_unchanged_without_workers() -> None:
    markup = svg.timeline_svg(workers_test())
    assert markup is not None
    assert "<stale>" not in markup and "&lt;stale&gt; &amp; &quot;unusable&quot;" in markup
    parse(markup)  # well formed
    plain = drawn({"races": [], "fleets": [{"released": 0.5, "servers": [server(0, 10, "ready")]}]})
    assert "worker" not in plain.all("g", "sg-legend")[0].text()
    text = text_timeline.timeline_of(
        {"races": [], "fleets": [{"released": 0.5, "servers": [server(0, 10, "exited", exit=1)]}]}
    )
    assert text is not None and "worker" not in text


def test_the_html_report_names_a_dead_worker_under_a_ready_server() -> None:
    test = {
        **workers_test(),
        "nodeid": "t.py::test_workers",
        "outcome": "failed",
        "seed": 1,
        "replay": "pytest t.py::test_workers",
        "reruns": 0,
        "attempts": [],
        "hidden_failure": None,
        "verdict": None,
        "time_to_ready": None,
    }
    test["fleets"][0]["servers"][0]["absorbed"] = False
    document = {"target": "cpu", "seed": 1, "exit_status": 1, "versions": {}, "totals": {}}
    root = assert_self_contained(report_html({**document, "tests": [test]}))
    section = section_of(root, test)
    (row,) = section.all("tr", "sg-server-row")
    (state,) = row.all("td", "sg-failed")  # ready, but its start-up failed
    assert state.text() == "ready; 2 of 5 workers failed"
    (problems,) = section.all("ul", "sg-worker-problems")
    assert [item.text() for item in problems.all("li")] == [
        f"server 0: worker pid 101 exited with code 3 ({CAUSE})",
        "server 0: worker pid 102 ended without a word",
    ]
    assert len(timeline_of(section).all("g", "sg-end-failed")) == 2


def test_a_real_server_whose_worker_died_has_its_end_mark(guard_pytester: pytest.Pytester) -> None:
    """A supervisor that answers its probe while one of its two workers dies (the
    ``tests/test_report.py`` server): the dead worker's row ends with its failed mark."""
    from test_report import WORKER_CAUSE, WORKERS_SERVER

    guard_pytester.makepyfile(workers=WORKERS_SERVER)
    document = run_report(
        guard_pytester,
        """
def test_workers(hub_cache, hub_race, server_fleet):
    repo = hub_cache.add_model("acme/tiny", CONFIG)
    hub_race.arm("pointer_swap", repo, "config.json")
    server_fleet.launch(
        [sys.executable, "workers.py", "{port}"], count=1, timeout=20, ready=ready.http("/"),
        workers=1,
    ).assert_all_ready()
""",
        failed=1,
    )
    (test,) = document["tests"]
    (member,) = test["fleets"][0]["servers"]
    (dead,) = [w for w in member["workers"] if w["failed"]]
    section = section_of(assert_self_contained(report_html(document)), test)
    (row,) = timeline_of(section).all("g", "sg-row", data_pid=str(dead["pid"]))
    assert row.attrs["data-kind"] == "child"
    (end,) = row.all("g", "sg-end")
    assert "sg-end-failed" in end.classes and end.attrs["data-code"] == "1"
    assert f"cause: {WORKER_CAUSE}" in end.title()
    assert end.all("text", "sg-end-label")[0].text() == "code 1"
    (problems,) = section.all("ul", "sg-worker-problems")
    assert f"worker pid {dead['pid']} exited with code 1 ({WORKER_CAUSE})" in problems.text()
