"""Words every part may use, so that a thing is said one way: how many of something there are,
the name of a signal, and text from a process under test made safe to show (``printable``).

Standard library only, and nothing of the package: the report's views (``report/words.py``
re-exports these) and the background-import scan (``imports/scan.py``) word counts the same.
"""

from __future__ import annotations

import re
import signal
import unicodedata


def count(number: int, word: str, plural: str | None = None) -> str:
    """``1 window``, ``2 windows``; ``plural`` where adding an ``s`` is wrong (``processes``)."""
    return f"{number} {word if number == 1 else (plural or word + 's')}"


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 77`` for a number the platform does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# Characters that are safe as they are: the printable ASCII ones, newline and tab. A CR, and
# each run of other characters, is looked at on its own (``_shown``).
_NOT_PLAIN = re.compile(r"\r\n?|[^\n\r\t\x20-\x7e]+")
# Unicode categories a terminal or a report reader acts on rather than shows: control characters
# (Cc: ESC, BEL, NUL, CR, backspace, the C1 controls U+0080-U+009F), format characters (Cf:
# bidi overrides and isolates, zero-width characters, the byte order mark), lone surrogates
# (Cs) and the line and paragraph separators (Zl, Zp).
_ACTED_ON = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# ``errors="surrogateescape"`` decodes an undecodable byte 0xNN as the lone surrogate U+DCNN.
_ESCAPED_BYTES = range(0xDC80, 0xDD00)


def printable(text: str | bytes) -> str:
    """``text`` as it can be shown on a terminal, in a failure message or in a report, with
    nothing in it that a terminal or a reader would act on: each control or format character
    (ESC, BEL, NUL, backspace, form feed, DEL, the C1 controls, bidi overrides, zero-width
    characters, line separators) is written as its escape (``\\x1b``, ``\\r``, ``\\u202e``),
    and so is each byte that is not UTF-8 (``\\xff``, from bytes or from a str decoded with
    ``errors="surrogateescape"``). Newline and tab stay; ``\\r\\n`` becomes a newline (it
    rewrites nothing), a CR anywhere else is shown as ``\\r``.

    Every other character stays, backslashes too: a server that prints the four characters
    ``\\x1b`` reads the same as one that prints ESC, and ``printable`` of a ``printable`` text
    is that text. Server output, worker causes and exception messages of the processes under
    test pass through it on their way to the terminal, the JSON report and the HTML report
    (which escapes its markup after it)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="surrogateescape")
    return _NOT_PLAIN.sub(_shown, text)


def _shown(match: re.Match[str]) -> str:
    run = match.group()
    if run == "\r\n":
        return "\n"
    return "".join(
        _escape(character) if unicodedata.category(character) in _ACTED_ON else character
        for character in run
    )


def _escape(character: str) -> str:
    code = ord(character)
    if character == "\r":
        return "\\r"
    if code in _ESCAPED_BYTES:
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
