"""What a fake repo's files hold, checked where it is given, before anything is written.

A dict or list is written as JSON, and it must be strict JSON: ``json.dumps`` writes ``nan``
and ``Infinity`` (which no strict reader accepts), turns the keys ``1`` and ``"1"`` into one,
and raises ``TypeError`` from its encoder on a set or an object, or ``RecursionError`` on deep
nesting. Each of those is refused here instead, naming the file and the key path of the value
(``invalid content for 'config.json' at ['a'][1]: ...``). Text must be valid Unicode, as it is
written as UTF-8.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError

# Deeper than any config a library writes, and far from Python's recursion limit (a reader
# such as json.loads recurses once per level).
MAX_DEPTH = 100
STRICT_JSON = (
    "expected strict JSON: objects with string keys, arrays, strings, finite numbers, true,"
    " false and null"
)


def encode_content(filename: str, content: object, owner: str = "") -> bytes:
    """Bytes for a file given as a dict/list (JSON, as ``save_pretrained`` writes it), str or
    bytes; ``owner`` (``'org/x'``) is named in the error."""
    of = f" (a file of {owner})" if owner else ""
    if isinstance(content, bytes):
        return content
    if isinstance(content, str):
        problem = _text_problem(content)
        if problem is not None:
            raise InvalidArgumentError(f"invalid content for {filename!r}: {problem}{of}")
        return content.encode("utf-8")
    if isinstance(content, (Mapping, list)):
        found = json_problem(content)
        if found is not None:
            path, problem = found
            raise InvalidArgumentError(
                f"invalid content for {filename!r} at {path or 'the top'}: {problem};"
                f" {STRICT_JSON}{of}"
            )
        return (json.dumps(content, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()
    raise ArgumentTypeError(
        f"invalid content for {filename!r}: {type(content).__name__}; expected a dict or list"
        f" (written as JSON), a str or bytes{of}"
    )


def json_problem(value: object) -> tuple[str, str] | None:
    """The key path (``['a'][1]``) of the first value that is not strict JSON and what is
    wrong with it, or None when ``value`` is strict JSON."""
    return _problem(value, "", (), 0)


def _problem(
    value: object, path: str, ancestors: tuple[int, ...], depth: int
) -> tuple[str, str] | None:
    if value is None or isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, f"{value!r} is not a finite number")
    if isinstance(value, str):
        problem = _text_problem(value)
        return None if problem is None else (path, problem)
    if not isinstance(value, (Mapping, list, tuple)):
        return path, f"{_shown(value)} is {_a(type(value).__name__)}, not a JSON value"
    if id(value) in ancestors:
        return path, "the value refers to itself (a cycle)"
    if depth >= MAX_DEPTH:
        return path, f"the value is nested deeper than {MAX_DEPTH} levels"
    inside = (*ancestors, id(value))
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                kind = _a(type(key).__name__)
                return path, f"key {_shown(key)} is {kind}; JSON objects take string keys only"
            problem = _text_problem(key)
            if problem is not None:
                return path, f"key {key!r}: {problem}"
            found = _problem(item, f"{path}[{key!r}]", inside, depth + 1)
            if found is not None:
                return found
        return None
    for index, item in enumerate(value):
        found = _problem(item, f"{path}[{index}]", inside, depth + 1)
        if found is not None:
            return found
    return None


def _text_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"{text[error.start : error.end]!r} cannot be written as UTF-8 (a lone surrogate)"
    return None


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def _shown(value: object) -> str:
    """A short repr: a value's repr may be long, or raise."""
    try:
        text = repr(value)
    except Exception:  # a user's object whose __repr__ fails: its type says enough
        return f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."
