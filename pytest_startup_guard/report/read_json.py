"""Reading a JSON file that may come from anywhere: a regular file, bounded, strict JSON.

``read_json(path)`` is the one way the report command reads a file it is given (a CI
artifact, a file edited by hand, a path that is not a file at all). Each failure is an
``UnreadableFileError`` whose message names the file and what was expected, never an exception
of the parser or a hang:

- only a regular file is read: the path is looked at first (``os.stat``, which follows a
  symlink as reading would), and a folder, a FIFO, a socket or a device is refused without
  opening it; the file is then opened with ``O_NONBLOCK`` and looked at again through its
  descriptor (``fstat``), so a FIFO swapped in between cannot block the open or the read;
- at most ``MAX_BYTES`` are read, and the text is UTF-8;
- strict JSON: ``NaN``, ``Infinity`` and ``-Infinity``, which Python's ``json`` accepts by
  default, are refused, as every other JSON reader refuses them;
- nested at most ``MAX_DEPTH`` lists and objects deep (the report is about ten): a deeper
  document is refused where it gets too deep, and one deep enough to exhaust the parser's
  recursion is refused as such, never a ``RecursionError``.

Standard library only: the ``startup-guard-report`` command starts without pytest.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from pytest_startup_guard.errors import UnreadableFileError

MAX_BYTES = 256 * 1024 * 1024  # a report of thousands of tests is a few MiB
MAX_DEPTH = 64  # lists and objects within each other
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def read_json(path: Path, *, max_bytes: int | None = None, max_depth: int | None = None) -> Any:
    """The JSON value in the regular file at ``path`` (see the module for what is refused);
    the bounds are ``MAX_BYTES`` and ``MAX_DEPTH`` unless given."""
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    text = _read_text(path, max_bytes)
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise UnreadableFileError(
            f"{path} is not a JSON file this can read: nested deeper than {max_depth} levels"
        ) from None
    except _NonFiniteError as error:
        raise UnreadableFileError(
            f"{path} is not strict JSON: {error} is not a JSON number (write null instead)"
        ) from None
    except ValueError as error:
        raise UnreadableFileError(f"{path} is not JSON: {error}") from None
    deep = _too_deep(document, max_depth)
    if deep is not None:
        raise UnreadableFileError(
            f"{path} is not a JSON file this can read: {deep or '/'} is nested deeper than"
            f" {max_depth} levels"
        )
    return document


def file_kind(mode: int) -> str | None:
    """What a file that is not a regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((words for is_kind, words in _KINDS if is_kind(mode)), "not a regular file")


def _read_text(path: Path, max_bytes: int) -> str:
    try:
        kind = file_kind(os.stat(path).st_mode)
        if kind is not None:
            raise UnreadableFileError(f"cannot read {path}: it is {kind}, not a file")
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise UnreadableFileError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        kind = file_kind(os.fstat(descriptor).st_mode)  # what was opened, not what was looked at
        if kind is not None:
            raise UnreadableFileError(f"cannot read {path}: it is {kind}, not a file")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise UnreadableFileError(f"cannot read {path}: {error.strerror or error}") from None
    finally:
        os.close(descriptor)
    if len(data) > max_bytes:
        raise UnreadableFileError(f"{path} is too big to be a report: over {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableFileError(f"{path} is not JSON (not UTF-8 text)") from None


class _NonFiniteError(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NonFiniteError(name)


def _too_deep(document: Any, max_depth: int) -> str | None:
    """The JSON pointer of the first value nested deeper than ``max_depth``, or None.
    Iterative: a walk that recursed would fail where the parser did not."""
    pending: list[tuple[Any, str, int]] = [(document, "", 1)]
    while pending:
        value, where, depth = pending.pop()
        if not isinstance(value, (dict, list)):
            continue
        if depth > max_depth:
            return where
        items = value.items() if isinstance(value, dict) else enumerate(value)
        pending.extend((item, f"{where}/{key}", depth + 1) for key, item in items)
    return None


__all__ = ["MAX_BYTES", "MAX_DEPTH", "file_kind", "read_json"]
