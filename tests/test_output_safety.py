"""Output cannot hurt a terminal or a report: what a process under test prints reaches the
terminal, the JSON report and the HTML report only through ``wording.printable``; and the
readiness probes refuse a bad argument where they are called."""

from __future__ import annotations

import html
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_startup_guard import ready
from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError
from pytest_startup_guard.wording import printable

# -- printable -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # ANSI colours
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear the screen, cursor home
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # set the window title (OSC), BEL
        ("a\x00b", "a\\x00b"),  # NUL
        ("secret\rshown", "secret\\rshown"),  # CR: overwrite the line
        ("ab\x08\x08xy", "ab\\x08\\x08xy"),  # backspace
        ("page\x0cfeed\x0bvt", "page\\x0cfeed\\x0bvt"),  # form feed, vertical tab
        ("del\x7f", "del\\x7f"),  # DEL
        ("\x9b2J\x85", "\\x9b2J\\x85"),  # C1 controls: CSI, next line
        ("\u202eevil\u202c", "\\u202eevil\\u202c"),  # bidi override
        ("\u2066isolate\u2069", "\\u2066isolate\\u2069"),  # bidi isolate
        ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),  # zero-width space, BOM
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),  # line and paragraph separators
        ("bad \udcff\udcfe", "bad \\xff\\xfe"),  # undecodable bytes (surrogateescape)
        ("lone \ud800", "lone \\ud800"),  # a lone surrogate of another origin
        (b"bytes \xff\xc3( \xe2\x82", "bytes \\xff\\xc3( \\xe2\\x82"),  # invalid UTF-8
        (b"utf-8 \xc3\xa9 \x1b", "utf-8 \u00e9 \\x1b"),  # valid UTF-8 decoded, ESC escaped
    ],
)
def test_printable_shows_what_a_terminal_would_act_on_as_escapes(
    text: str | bytes, shown: str
) -> None:
    assert printable(text) == shown


def test_printable_keeps_text_newlines_and_tabs() -> None:
    text = "Traceback:\n\tOSError: config.json \u00e9\u4e2d\u00a0\u2588 100%|##| C:\\path\\x1b\n"
    assert printable(text) == text
    assert printable("windows\r\nline\r\n") == "windows\nline\n"  # CRLF rewrites nothing


def test_printable_leaves_nothing_a_terminal_acts_on_and_is_idempotent() -> None:
    every = "".join(chr(code) for code in range(0x110000))
    shown = printable(every)
    acted_on = [c for c in shown if c not in "\n\t" and unicodedata.category(c)[0] in "C"]
    assert {unicodedata.category(c) for c in acted_on} <= {"Co", "Cn"}  # private, unassigned
    assert not any(unicodedata.category(c) in ("Zl", "Zp") for c in shown)
    assert printable(shown) == shown
    shown.encode("utf-8")  # no lone surrogate left: a JSON reader takes it


# -- the readiness probes check their arguments at the call -------------------------------------

BAD_PROBES: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    ("file-unknown", lambda: ready.file("/tmp/up-{name}"), InvalidArgumentError, "{name}"),
    ("file-positional", lambda: ready.file("/tmp/up-{}"), InvalidArgumentError, "{}"),
    ("file-attribute", lambda: ready.file("/tmp/{index.real}"), InvalidArgumentError, "index"),
    ("file-brace", lambda: ready.file("/tmp/up-{index"), InvalidArgumentError, "path="),
    ("file-spec", lambda: ready.file("/tmp/{index:q}"), InvalidArgumentError, "path="),
    ("file-empty", lambda: ready.file(""), InvalidArgumentError, "path="),
    ("file-int", lambda: ready.file(3), ArgumentTypeError, "path=3"),  # type: ignore[arg-type]
    ("file-bytes", lambda: ready.file(b"/tmp/x"), ArgumentTypeError, "path="),  # type: ignore[arg-type]
    ("log-regex", lambda: ready.log("ready (on"), InvalidArgumentError, "pattern="),
    ("log-empty", lambda: ready.log(""), InvalidArgumentError, "matches empty output"),
    ("log-star", lambda: ready.log("x*"), InvalidArgumentError, "matches empty output"),
    ("log-bytes", lambda: ready.log(b"up"), ArgumentTypeError, "pattern="),  # type: ignore[arg-type]
    ("http-path", lambda: ready.http("health"), InvalidArgumentError, "path="),
    ("http-space", lambda: ready.http("/he alth"), InvalidArgumentError, "path="),
    ("http-status", lambda: ready.http("/", status=99), InvalidArgumentError, "status=99"),
    ("http-bool", lambda: ready.http("/", status=True), ArgumentTypeError, "status=True"),
    ("http-expect", lambda: ready.http("/", expect="ok"), ArgumentTypeError, "expect="),  # type: ignore[arg-type]
    ("call", lambda: ready.call("probe"), ArgumentTypeError, "function="),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(
    ("make", "error", "named"),
    [case[1:] for case in BAD_PROBES],
    ids=[case[0] for case in BAD_PROBES],
)
def test_a_bad_probe_argument_is_refused_at_the_call(
    make: Callable[[], object], error: type[Exception], named: str
) -> None:
    with pytest.raises(error) as raised:
        make()
    message = str(raised.value)
    assert named in message and "ready." in message
    assert "expected" in message or "known" in message  # what is accepted


def test_ready_file_names_the_placeholders_it_knows() -> None:
    with pytest.raises(InvalidArgumentError, match=r"known: \{index\}, \{port\}, \{pid\}"):
        ready.file("/tmp/up-{member}")
    probe = ready.file(Path("/tmp/up-{index:02d}-{pid}-{{x}}"))
    assert probe.path == "/tmp/up-{index:02d}-{pid}-{{x}}" and not probe.needs_port
    assert ready.file("/tmp/{port}").needs_port
    assert ready.log(re.compile("^UP$", re.IGNORECASE)).describe() == "ready.log('^UP$')"


# -- a server that prints terminal controls, through the plugin ---------------------------------

NASTY_SERVER = r"""
import sys
out = sys.stdout.buffer
out.write(b"boot\x1b[31m red\x1b[0m \x07bell \x00nul \x1b[2Jclear \x08bs\n")
out.write(b"progress\rrewritten \x1b]0;title\x07 \xc2\x9b2J c1 \xe2\x80\xaeevil\n")
out.write(b"bad utf-8: \xff\xfe end\n")
out.write(b"OSError: cannot read config.json \x1b[2K\xff\n")
out.flush()
sys.exit(3)
"""

INNER = """
import sys
import pytest
from pytest_startup_guard import ready

def test_nasty(server_fleet):
    fleet = server_fleet.launch([sys.executable, "nasty.py"], ready=ready.log("never ready"), timeout=30)
    fleet.assert_all_ready()

def test_failure_that_quotes_controls(server_fleet):
    raise AssertionError("boom \\x1b[2J\\x07 here")

def test_bad_placeholder_is_an_error_at_the_call():
    with pytest.raises(ValueError, match=r"unknown placeholder \\{nope\\} in path='up-\\{nope\\}' for ready.file\\(\\)"):
        ready.file("up-{nope}")
"""

# Raw bytes and characters that must not reach a terminal or a report (what the server printed).
RAW_BYTES = [b"\x1b", b"\x07", b"\x00", b"\x08", b"\r", b"\xff", b"\xc2\x9b", b"\xe2\x80\xae"]
RAW_CHARACTERS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e\ud800-\udfff]")
# What of it must be there instead, escaped: ESC, clear screen, BEL, NUL, backspace, C1 CSI,
# the bidi override and the bytes that are not UTF-8.
ESCAPED = [
    "boot\\x1b[31m red\\x1b[0m \\x07bell \\x00nul \\x1b[2Jclear \\x08bs",
    "\\x9b2J c1 \\u202eevil",
    "bad utf-8: \\xff\\xfe end",
]


def strings(value: Any) -> Iterator[str]:
    """Every str in a JSON document, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_a_server_printing_terminal_controls_reaches_no_terminal_or_report_raw(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(nasty=NASTY_SERVER, test_nasty=INNER)
    guard_pytester.mkdir("out")
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "--startup-guard-report=out/report.json",
        "--startup-guard-html=out/report.html",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=2)
    # pytester kept pytest's stdout as it came: bytes a terminal would have been given. Only
    # pytest's own lines quote the test's own failure ("boom") raw; the plugin's never do.
    terminal = (guard_pytester.path / "stdout").read_bytes()
    section = terminal[terminal.index(b"= startup guard =") : terminal.index(b"short test summary")]
    assert b"failure (call): AssertionError: boom \\x1b[2J\\x07 here" in section
    assert not [raw for raw in RAW_BYTES if raw in section]
    others = b"\n".join(line for line in terminal.split(b"\n") if b"boom" not in line)
    assert not [raw for raw in RAW_BYTES if raw in others]
    text = terminal.decode("utf-8")
    missing = [escaped for escaped in ESCAPED if escaped not in text]
    assert not missing, text
    # The failure message: the exit, the root cause from the output, its last lines.
    result.stdout.fnmatch_lines(
        [
            "*server 0  pid *  EXITED with code 3 after *",
            "*root cause: OSError: cannot read config.json \\x1b[2K\\xff*",
            "*| progress*",  # a CR ends a line of the tail, as it does on a terminal
            "*| rewritten \\x1b]0;title\\x07*",
        ]
    )
    result.stdout.fnmatch_lines(["*= startup guard =*", "FAILED *test_nasty*"])

    report = json.loads((guard_pytester.path / "out" / "report.json").read_text("utf-8"))
    found = [s for s in strings(report) if RAW_CHARACTERS.search(s.replace("\n", ""))]
    assert not found  # no control character, no lone surrogate: any JSON reader takes it
    (server,) = next(t for t in report["tests"] if "test_nasty" in t["nodeid"])["fleets"][0][
        "servers"
    ]
    assert server["state"] == "exited" and all(e in server["output_tail"] for e in ESCAPED)

    page = (guard_pytester.path / "out" / "report.html").read_text("utf-8")
    assert not RAW_CHARACTERS.search(page.replace("\n", "").replace("\t", ""))
    shown = html.unescape(page)
    assert all(escaped in shown for escaped in ESCAPED)
