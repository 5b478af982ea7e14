"""Corruptions of a plain file: what a cache entry looks like after a writer was cut short.

A compile or kernel cache (vLLM's ``torch_compile_cache``, Triton's kernel cache, inductor's
FX graph cache) keeps one file per entry. A crash, a full disk or a killed process during its
write leaves the entry as one of these, and the next start-up finds it:

- ``empty``: 0 bytes, a file created and never written (vllm-project/vllm#35061: a 0-byte
  compile-cache file loaded, and failing, on every restart);
- ``truncated``: the first half of what was written, a write cut short;
- ``garbage``: as many bytes as were written, none of them what was written (every byte changed,
  seeded by the test), a torn page or a write of another buffer.

Unlike a model's config (a source, which must fail closed), such an entry is a cache: the
right start-up discards it and rebuilds it. Each corruption is written in place, as the broken
writer left it, after copy on write (``break_hard_link``) keeps a hard-linked source whole.
"""

from __future__ import annotations

import os
import random
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_startup_guard.cache.layout import break_hard_link
from pytest_startup_guard.errors import InvalidArgumentError, UnknownNameError


@dataclass(frozen=True)
class FileCorruption:
    """One way a plain file is left broken: ``corrupt(original, rng)`` gives its new bytes."""

    name: str
    description: str
    corrupt: Callable[[bytes, random.Random], bytes]


def _empty(original: bytes, rng: random.Random) -> bytes:
    return b""


def _truncated(original: bytes, rng: random.Random) -> bytes:
    return original[: len(original) // 2]


def _garbage(original: bytes, rng: random.Random) -> bytes:
    # XOR with a non-zero byte changes every byte, so no byte is what was written.
    return bytes(byte ^ rng.randrange(1, 256) for byte in original)


FILE_CORRUPTIONS: dict[str, FileCorruption] = {
    c.name: c
    for c in (
        FileCorruption("empty", "0 bytes: the file was created and never written", _empty),
        FileCorruption("truncated", "the first half of what was written", _truncated),
        FileCorruption(
            "garbage",
            "as many bytes as were written, every one of them changed (seeded by the test)",
            _garbage,
        ),
    )
}


@dataclass(frozen=True)
class CorruptedFile:
    """A file a corruption was written to: its bytes before and after."""

    path: Path
    corruption: str
    original: bytes
    corrupt: bytes


def get_file_corruption(name: object, where: str = "") -> FileCorruption:
    if not isinstance(name, str) or name not in FILE_CORRUPTIONS:
        raise UnknownNameError("file corruption", name, FILE_CORRUPTIONS, where)
    return FILE_CORRUPTIONS[name]


def corrupt_file(path: Path, name: str, seed: int, where: str) -> CorruptedFile:
    """Write corruption ``name`` onto the plain file at ``path`` in place; ``seed`` makes
    ``garbage`` the same bytes in every run of the test. Refuses what is not a plain file that
    holds something (a corruption of nothing would leave it as it was)."""
    corruption = get_file_corruption(name, where)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        raise InvalidArgumentError(
            f"invalid path={str(path)!r} for {where}: no file is there; write the cache entry"
            " first (as a start-up that filled the cache would), then apply the corruption"
        ) from None
    if not stat.S_ISREG(status.st_mode):
        what = "a folder" if stat.S_ISDIR(status.st_mode) else "not a plain file (a link?)"
        raise InvalidArgumentError(
            f"invalid path={str(path)!r} for {where}: it is {what}; expected a plain file,"
            " the cache entry a start-up loads"
        )
    original = path.read_bytes()
    if not original:
        raise InvalidArgumentError(
            f"invalid path={str(path)!r} for {where}: the file is empty, so corrupting it"
            " changes nothing; write the whole cache entry first"
        )
    data = corruption.corrupt(original, random.Random(seed))
    break_hard_link(path)
    with open(path, "wb") as handle:  # in place, as the broken writer left it
        handle.write(data)
    return CorruptedFile(path, name, original, data)


__all__ = [
    "FILE_CORRUPTIONS",
    "CorruptedFile",
    "FileCorruption",
    "corrupt_file",
    "get_file_corruption",
]
