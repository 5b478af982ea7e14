"""A member's output is read in bounded memory, however much it prints: ``ready.log`` reads
only what is new at each poll, failure messages quote its end read from the end of the file,
and exception lines are searched a block at a time (``fleet/output.py``)."""

from __future__ import annotations

import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_startup_guard import ready
from pytest_startup_guard.fleet.output import (
    CHUNK_BYTES,
    WINDOW_CHARS,
    OutputFollower,
    blocks,
    mentions,
    required_text,
    tail,
)
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.fleet.workers import MAX_EXCEPTION_LINES, exception_lines

MB = 1024 * 1024
LOG_LINE = b"INFO 2024-05-01 12:00:00 worker 3: loaded shard 17 of 64 (text to fill a log)\n"
_Result = TypeVar("_Result")
# What reading an output may hold at once: a few chunks (bytes, their text, the window), far
# below the tens of megabytes each test prints.
HELD = 8 * CHUNK_BYTES


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def fill(path: Path, megabytes: int, end: bytes = b"") -> None:
    """``megabytes`` of log lines, then ``end``, written a megabyte at a time."""
    block = LOG_LINE * (MB // len(LOG_LINE))
    with open(path, "wb") as handle:
        for _ in range(megabytes):
            handle.write(block)
        handle.write(end)


def peak_of(action: Callable[[], _Result]) -> tuple[_Result, int]:
    """What ``action`` returns, and the most memory Python held for it meanwhile (bytes)."""
    tracemalloc.start()
    try:
        result = action()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def search_all(follower: OutputFollower, pattern: str) -> re.Match[str] | None:
    """Poll until the follower has read the whole file (a poll reads at most a few chunks)."""
    compiled = re.compile(pattern, re.MULTILINE)
    while True:
        match = follower.search(compiled)
        if match is not None or follower.offset >= follower.path.stat().st_size:
            return match or follower.search(compiled)


# -- ready.log's reader ------------------------------------------------------------------------


def test_a_line_written_in_two_parts_matches_once_it_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"booting\nserver rea")
    follower = OutputFollower(path)
    assert search_all(follower, "^server ready$") is None
    append(path, b"dy\n")
    match = search_all(follower, "^server ready$")
    assert match is not None and match.group() == "server ready"


def test_a_member_found_ready_stays_found_when_asked_again(tmp_path: Path) -> None:
    # launch(workers=N) asks the probe again until N workers are up: the line is still there.
    path = tmp_path / "out.log"
    path.write_bytes(b"server ready\n")
    member = ready.Member(0, 1, None, path)
    probe = ready.log("^server ready$")
    assert probe.check(member).ready
    append(path, b"more output\n")
    assert probe.check(member).ready and probe.check(member).ready
    assert ready.log("^more output$").check(member).ready  # another pattern: its own search
    assert probe.check(member).ready


@pytest.mark.parametrize("chunk_bytes", [1, 3, 7, 64])
def test_a_match_across_chunk_borders_is_found(tmp_path: Path, chunk_bytes: int) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"x\n" * 50 + "listening on port 8000 \u00e9\u00e9\r\n".encode() + b"y\n" * 50)
    follower = OutputFollower(path, window_chars=64, chunk_bytes=chunk_bytes)
    match = search_all(follower, r"^listening on port (\d+) \u00e9+$")  # CRLF read as a newline
    assert match is not None and match.group(1) == "8000"


def test_dollar_does_not_match_where_only_a_chunk_ended(tmp_path: Path) -> None:
    # "ready" ends the first chunk, but not its line: "ready$" must not match "readying".
    path = tmp_path / "out.log"
    path.write_bytes(b"ready" + b"ing\n" + b"z\n" * 10)
    follower = OutputFollower(path, window_chars=64, chunk_bytes=5)
    assert search_all(follower, "^ready$") is None


def test_caret_does_not_match_inside_a_line_longer_than_the_window(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"x" * 500 + b"ready\n")  # "ready" ends a long line: it starts no line
    follower = OutputFollower(path, window_chars=50, chunk_bytes=100)
    assert search_all(follower, "^ready$") is None
    assert len(follower.kept) <= 51
    append(path, b"ready\n")
    assert search_all(follower, "^ready$") is not None


def test_a_multi_line_match_is_found_within_the_window_only(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"a\n" * 1000 + b"loading\nweights\ndone\n")
    pattern = r"loading\n(\w+\n)*done"
    assert search_all(OutputFollower(path, window_chars=64, chunk_bytes=7), pattern)
    path.write_bytes(b"a\n" * 1000 + b"loading\n" + b"weights\n" * 20 + b"done\n")
    assert not search_all(OutputFollower(path, window_chars=64, chunk_bytes=7), pattern)


def test_ready_log_reads_50_megabytes_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"")
    follower = OutputFollower(path)
    pattern = re.compile(r"^Uvicorn running on http://127\.0\.0\.1:(\d+)$", re.MULTILINE)
    block = LOG_LINE * (MB // len(LOG_LINE)) + b"a partial li"

    def poll_while_it_prints() -> list[int]:
        kept = []
        for _ in range(50):  # 50 MB, a megabyte per write, a search after each
            append(path, block)
            assert follower.search(pattern) is None
            kept.append(len(follower.kept))
        append(path, b"ne\nUvicorn running on http://127.0.0.1:8000\n")
        match = follower.search(pattern)
        assert match is not None and match.group(1) == "8000"
        return kept

    kept, peak = peak_of(poll_while_it_prints)
    assert follower.offset == path.stat().st_size
    assert max(kept) <= WINDOW_CHARS + 1  # what is kept between polls
    assert peak < HELD, f"{peak / MB:.1f} MB held to read 50 MB"


@pytest.mark.parametrize(
    ("pattern", "required"),
    [
        (r"^INFO: +Uvicorn running on http://\S+$", "Uvicorn running on http://"),
        (r"^ready$", "ready"),
        (r"listening on port (\d+)", "listening on port "),
        (r"(?:warm)?up done", "up done"),
        (r"(?i)ready", ""),  # a case-insensitive pattern is searched everywhere
        (r"up|ready", ""),  # so is one whose match need not hold any one text
        (r"x{3}", ""),
    ],
)
def test_text_without_what_every_match_holds_is_not_searched(pattern: str, required: str) -> None:
    compiled = re.compile(pattern, re.MULTILINE)
    assert required_text(compiled) == required
    match = compiled.search("INFO:  Uvicorn running on http://h:1\nup done\nready\nxxx")
    assert match is None or required in match.group()


# -- what failure messages quote ------------------------------------------------------------


def test_the_tail_is_read_from_the_end_of_a_large_output(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    fill(path, 30, b"OSError: config.json \xff\x1b[2J\nprogress 10%\rprogress 90%\r\nlast\n")
    text, peak = peak_of(lambda: tail(path, 4))
    assert text.splitlines() == [
        "OSError: config.json \\xff\\x1b[2J",
        "progress 10%",  # a CR ends a line here, as it does on a terminal
        "progress 90%",
        "last",
    ]
    assert peak < MB, f"{peak / MB:.1f} MB held for a tail"


def test_a_long_line_is_quoted_by_its_end(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"x" * 5000 + b"the end\nshort\n")
    first, second = tail(path, 2, line_chars=100).splitlines()
    assert first.startswith("[4907 characters left out] ") and first.endswith("xthe end")
    assert second == "short"
    assert tail(tmp_path / "missing.log", 15) == ""
    (tmp_path / "empty.log").write_bytes(b"\n\n")
    assert tail(tmp_path / "empty.log", 15) == ""


def test_exception_lines_and_words_are_searched_a_block_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    fill(path, 30, b"OSError: cannot read config.json \x1b[0m\nValueError: bad\n")

    def search() -> tuple[list[str], bool, bool]:
        lines = exception_lines(blocks(path), ["config.json"])
        return lines, mentions(path, "ValueError: bad"), mentions(path, "Address already in use")

    (lines, found, absent), peak = peak_of(search)
    assert lines == ["OSError: cannot read config.json \\x1b[0m", "ValueError: bad"]
    assert found and not absent
    assert peak < HELD, f"{peak / MB:.1f} MB held to search 30 MB"


def test_exception_lines_are_bounded_and_put_the_raced_file_first(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    errors = b"".join(b"ValueError: retry %d\n" % n for n in range(1000))
    path.write_bytes(errors + b"OSError: no config.json\n")
    lines = exception_lines(blocks(path, chunk_bytes=100), ["config.json"])
    assert lines[0] == "OSError: no config.json"
    assert lines[1:4] == ["ValueError: retry 0", "ValueError: retry 1", "ValueError: retry 2"]
    assert len(lines) == 1 + MAX_EXCEPTION_LINES


def test_a_server_reads_its_large_output_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "server-0.log"
    fill(path, 30, b"OSError: [Errno 2] config.json \x1b[2J\nport 8000 in use\n")
    server = Server(0, 1, None, ["server"], path, state="exited", returncode=1, seconds_to_exit=0.5)
    server.raced_names = ("config.json",)

    def read() -> tuple[Any, ...]:
        return (
            server.root_causes(),
            server.output_search(r"port (\d+) in use"),
            server.output_mentions("Errno 2"),
            server.tail(1),
            server.report(),
        )

    (causes, match, mentioned, last, report), peak = peak_of(read)
    assert causes == ["OSError: [Errno 2] config.json \\x1b[2J"]
    assert match is not None and match.group(1) == "8000" and mentioned
    assert last == "port 8000 in use"
    assert "root cause: OSError: [Errno 2] config.json \\x1b[2J" in report and "\x1b" not in report
    assert peak < HELD, f"{peak / MB:.1f} MB held for 30 MB of output"


def test_a_line_without_end_comes_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"a" * 250 + b"\nb\n")
    pieces = list(blocks(path, chunk_bytes=64, line_chars=100))
    assert "".join(pieces) == "a" * 250 + "\nb\n"
    assert max(len(piece) for piece in pieces) <= 100 + 64


# -- through the plugin ------------------------------------------------------------------------

LOUD_SERVER = r"""
import sys, time
line = b"INFO loading weights: shard 17 of 64, 12.5 MB/s, eta 00:00:03 .................\n"
block = line * (1024 * 1024 // len(line))
for _ in range(int(sys.argv[1])):
    sys.stdout.buffer.write(block)
sys.stdout.buffer.write(b"Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)\n")
sys.stdout.flush()
time.sleep(60)
"""

LOUD_TEST = """
import sys, tracemalloc
from pytest_startup_guard import ready

def test_loud(server_fleet):
    tracemalloc.start()
    fleet = server_fleet.launch([sys.executable, "loud.py", "20"], count=2, timeout=60,
                                ready=ready.log(r"^Uvicorn running on \\S+:(\\d+) "))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    fleet.assert_all_ready()
    assert all(server.tail(1).startswith("Uvicorn running") for server in fleet.servers)
    # 2 x 20 MB printed; a reader of whole files would hold at least 40 MB
    assert peak < 16 * 1024 * 1024, f"{peak / 2**20:.1f} MB"
"""


def test_members_printing_megabytes_are_found_ready_in_bounded_memory(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(loud=LOUD_SERVER, test_loud=LOUD_TEST)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)
