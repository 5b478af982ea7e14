"""A member's output file, read in bounded memory however much the member prints.

A member writes its stdout and stderr to a file (``launcher``); it may print hundreds of
megabytes while the plugin watches it. Nothing here holds more than a few megabytes of it:

- ``OutputFollower``: what ``ready.log`` searches, poll after poll. It reads only the bytes
  written since the last poll, in chunks of ``CHUNK_BYTES``, and searches each chunk together
  with the text before it, kept up to ``WINDOW_CHARS`` characters (from a line's start). So a
  match that lies within ``WINDOW_CHARS`` characters of output is found whatever the chunks'
  borders, a line split over two writes included; a longer match is not.
- ``tail``: the last lines of the output, read from its end (at most ``TAIL_BYTES``), each line
  cut to its last ``LINE_CHARS`` characters, made ``printable``: what failure messages and the
  reports quote. A CR ends a line there, as it does in ``Path.read_text`` (a progress bar
  redrawn with CR reads as its last redraws).
- ``blocks``: the whole output from its start as text, a block of whole lines at a time (a line
  longer than ``WINDOW_CHARS`` characters comes in pieces): what is searched for exception
  lines or a word.
"""

from __future__ import annotations

import codecs
import functools
import importlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_startup_guard.wording import printable

CHUNK_BYTES = 1 << 20  # read at once
# How far back a match may reach: 64 Ki characters (a long traceback, a page of JSON).
WINDOW_CHARS = 64 * 1024
# At most this many chunks per poll, so that a member that prints faster than it is read is
# still looked at (its exit, the time-out) between two polls.
CHUNKS_PER_POLL = 16
TAIL_BYTES = 64 * 1024  # the end of the output a tail is taken from
LINE_CHARS = 2000  # of a longer line its end is quoted (a minified JSON document, say)


def _decoder(errors: str = "replace") -> io.IncrementalNewlineDecoder:
    """UTF-8 with universal newlines (``\\r\\n`` and ``\\r`` end a line), as
    ``Path.read_text`` reads, undecodable bytes replaced (or as ``errors`` says); a character
    split between two reads is decoded whole."""
    return io.IncrementalNewlineDecoder(
        codecs.getincrementaldecoder("utf-8")(errors=errors), translate=True
    )


class OutputFollower:
    """A growing output file, searched for what was written since the last ``search``."""

    def __init__(
        self,
        path: Path,
        *,
        window_chars: int = WINDOW_CHARS,
        chunk_bytes: int = CHUNK_BYTES,
        chunks_per_poll: int = CHUNKS_PER_POLL,
    ) -> None:
        self.path = path
        self.window_chars = window_chars
        self.chunk_bytes = chunk_bytes
        self.chunks_per_poll = chunks_per_poll
        self.offset = 0  # bytes read so far
        self._decoder = _decoder()
        # The text before the next chunk: at most ``window_chars`` characters and the one
        # before them (``_keep``).
        self.kept = ""
        self._start = 0  # where in ``kept`` a match may begin
        self._searched = False
        # The match found for each pattern, given again: the output still holds it (a member
        # found ready by its probe may be asked again, waiting for its workers).
        self._found: dict[re.Pattern[str], re.Match[str]] = {}

    def search(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        """The first match of ``pattern`` in the output written since the last search, together
        with the text kept from before it; None where there is none (yet). Once found, the
        same match is the answer for that pattern from then on."""
        match = self._found.get(pattern)
        if match is None:
            match = self._search(pattern)
            if match is not None:
                self._found[pattern] = match
        return match

    def _search(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below, whatever happens
        except OSError:
            return None
        with handle:
            handle.seek(self.offset)
            for _ in range(self.chunks_per_poll):
                chunk = handle.read(self.chunk_bytes)
                if not chunk and self._searched:
                    return None  # nothing new: it was searched as it is
                self._searched = True
                self.offset += len(chunk)
                window = self.kept + self._decoder.decode(chunk)
                required = required_text(pattern)
                match = None
                if not required or required in window:
                    end = self._searched_end(window, chunk)
                    match = pattern.search(window, self._start, end)
                self._keep(window)
                if match is not None or not chunk:
                    return match
        return None

    def _searched_end(self, window: str, chunk: bytes) -> int:
        """Where the search of ``window`` ends: at its end where the file ends there (a line
        still being written is searched as it is so far, as a read of the whole file would),
        else after its last whole line: the rest of it comes with the next chunk (``$`` must
        not match where only the chunk ended)."""
        if len(chunk) < self.chunk_bytes:
            return len(window)
        last_line = window.rfind("\n") + 1
        return last_line if len(window) - last_line <= self.window_chars else len(window)

    def _keep(self, window: str) -> None:
        """Keep the end of ``window`` for the next search: its last ``window_chars`` characters
        or fewer, from the start of a line, with the character before them; a match may begin
        only after that character. So ``^`` matches where a line really starts (also where the
        last line alone is longer and its end is kept), and a look-behind sees what was there."""
        if len(window) <= self.window_chars:
            self.kept = window  # where a match may begin in it has not moved
            return
        cut = len(window) - self.window_chars
        newline = window.find("\n", cut - 1)
        begin = newline if newline >= 0 else cut - 1
        self.kept, self._start = window[begin:], 1


@functools.lru_cache(maxsize=64)
def required_text(pattern: re.Pattern[str]) -> str:
    """The longest run of plain characters that every match of ``pattern`` contains ("" where
    none can be told): text without it is not searched, for ``str.find`` runs at memory speed
    and a regular expression without a plain prefix (``^ready$``) does not (about ten times
    slower). Read from the pattern's parse at its top level only: characters in a group, a
    branch or a repeat, and any pattern with ``re.IGNORECASE``, give nothing."""
    if pattern.flags & re.IGNORECASE:
        return ""
    try:
        parsed = _regex_parser().parse(pattern.pattern, pattern.flags)
        literal = _regex_parser().LITERAL
        best = run = ""
        for op, value in parsed:
            run = run + chr(value) if op is literal else ""
            best = max(best, run, key=len)
    except Exception:  # another Python's private parser: search everything, as before
        return ""
    return best


@functools.lru_cache(maxsize=1)
def _regex_parser() -> Any:
    """The ``re`` module's own parser: ``re._parser`` from Python 3.11, ``sre_parse`` before."""
    try:
        return importlib.import_module("re._parser")
    except ImportError:
        return importlib.import_module("sre_parse")


def tail(
    path: Path, lines: int, *, max_bytes: int = TAIL_BYTES, line_chars: int = LINE_CHARS
) -> str:
    """The last ``lines`` lines of the output at ``path`` (from at most its last ``max_bytes``
    bytes), ``printable``; a line longer than ``line_chars`` characters is quoted by its end,
    after how much of it was left out. "" where there is no output (or no file)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            handle.seek(start)
            data = handle.read(max_bytes)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="surrogateescape")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if start > 0 and "\n" in text:
        text = text[text.index("\n") + 1 :]  # the first line was cut: it starts before
    kept = text.rstrip("\n").split("\n")[-lines:] if text.strip("\n") else []
    return "\n".join(printable(_line_end(line, line_chars)) for line in kept)


def _line_end(line: str, chars: int) -> str:
    if len(line) <= chars:
        return line
    return f"[{len(line) - chars} characters left out] {line[-chars:]}"


def blocks(
    path: Path, *, chunk_bytes: int = CHUNK_BYTES, line_chars: int = WINDOW_CHARS
) -> Iterator[str]:
    """The output at ``path`` from its start, a block of whole lines at a time (at most about
    ``chunk_bytes`` of it); a line longer than ``line_chars`` characters comes cut into pieces
    of that length. Universal newlines; an undecodable byte is kept as its lone surrogate
    (``errors="surrogateescape"``): what is quoted of it is made ``printable``."""
    decoder = _decoder("surrogateescape")
    partial = ""
    try:
        with open(path, "rb") as handle:
            while True:
                chunk = handle.read(chunk_bytes)
                text = partial + decoder.decode(chunk, final=not chunk)
                if not chunk:
                    if text:
                        yield text
                    return
                end = text.rfind("\n") + 1
                block, partial = text[:end], text[end:]
                if block:
                    yield block
                while len(partial) > line_chars:  # a line without end yet: in pieces
                    yield partial[:line_chars]
                    partial = partial[line_chars:]
    except OSError:
        return


def mentions(path: Path, text: str) -> bool:
    """Whether the output at ``path`` contains ``text`` (within one line, or across lines if
    ``text`` has newlines and fits in a block), read a block at a time."""
    previous = ""
    overlap = len(text) - 1
    for block in blocks(path):
        if text in previous + block:
            return True
        previous = block[-overlap:] if overlap > 0 else ""
    return False


def printed_something(path: Path) -> bool:
    """Whether the output at ``path`` holds more than white space."""
    return any(block.strip() for block in blocks(path))
