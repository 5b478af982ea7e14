"""Persistent corruptions: faults that stay on disk until the test ends.

A start-up must fail on each of them, in bounded time, with a message that names the file or
the repo. The real loaders' reactions (transformers 5.24, huggingface_hub 2.4) are noted per
entry; they are the same messages a transient race produces, which is why only the outcome over
time tells the two apart.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_startup_guard.cache.layout import atomic_write, break_hard_link
from pytest_startup_guard.errors import StartupGuardError, UnknownNameError


@dataclass(frozen=True)
class CorruptionTarget:
    """The paths of one file of one revision of a cached repo."""

    label: str  # "config.json of acme/tiny@main", for messages
    pointer: Path  # snapshots/<commit>/<file>
    blob: Path  # blobs/<etag>
    ref: Path  # refs/<revision>
    no_exist: Path  # .no_exist/<commit>/<file>


@dataclass(frozen=True)
class Corruption:
    name: str
    description: str
    real_reaction: str
    apply: Callable[[CorruptionTarget], None]
    changes: str = "blob"  # the CorruptionTarget field naming the path it writes


def _rewrite_blob(target: CorruptionTarget, data: bytes) -> None:
    # In place, as a broken writer would leave it; copy on write protects shared blobs.
    break_hard_link(target.blob)
    with open(target.blob, "wb") as handle:
        handle.write(data)


def _empty(target: CorruptionTarget) -> None:
    _rewrite_blob(target, b"")


def _truncated(target: CorruptionTarget) -> None:
    data = target.blob.read_bytes()
    _rewrite_blob(target, data[: max(1, len(data) // 2)] if len(data) > 1 else b"{")


def _not_json(target: CorruptionTarget) -> None:
    _rewrite_blob(
        target,
        b"<!DOCTYPE html>\n<html><body><h1>502 Bad Gateway</h1></body></html>\n",
    )


def _no_model_type(target: CorruptionTarget) -> None:
    try:
        document = json.loads(target.blob.read_bytes())
    except ValueError as error:
        raise StartupGuardError(
            f"corruption 'no_model_type' needs a JSON object, but {target.label} is not JSON"
            f" ({error})"
        ) from error
    if not isinstance(document, dict):
        raise StartupGuardError(
            f"corruption 'no_model_type' needs a JSON object, but {target.label} holds a"
            f" {type(document).__name__}"
        )
    document.pop("model_type", None)
    _rewrite_blob(target, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())


def _binary(target: CorruptionTarget) -> None:
    # Not UTF-8, starts like a safetensors header: what a mix-up of files leaves behind.
    _rewrite_blob(target, b"\x80\x00\x00\x00\x00\x00\x00\x00" + bytes(range(256)) * 4)


def _dangling_pointer(target: CorruptionTarget) -> None:
    missing = target.blob.with_name(target.blob.name + ".missing")
    link = os.readlink(target.pointer)
    os.remove(target.pointer)
    os.symlink(os.path.join(os.path.dirname(link), missing.name), target.pointer)


def _missing_pointer(target: CorruptionTarget) -> None:
    os.remove(target.pointer)


def _missing_blob(target: CorruptionTarget) -> None:
    os.remove(target.blob)


def _empty_ref(target: CorruptionTarget) -> None:
    break_hard_link(target.ref)
    with open(target.ref, "w"):
        pass


def _no_exist(target: CorruptionTarget) -> None:
    os.remove(target.pointer)
    target.no_exist.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target.no_exist, b"")


CORRUPTIONS: dict[str, Corruption] = {
    c.name: c
    for c in (
        Corruption(
            "empty",
            "the blob is an empty file (a download or copy cut short)",
            "OSError: It looks like the config file at '…' is not a valid JSON file.",
            _empty,
        ),
        Corruption(
            "truncated",
            "the blob holds the first half of its content",
            "OSError: It looks like the config file at '…' is not a valid JSON file.",
            _truncated,
        ),
        Corruption(
            "not_json",
            "the blob is an HTML error page saved in place of the file",
            "OSError: It looks like the config file at '…' is not a valid JSON file.",
            _not_json,
        ),
        Corruption(
            "no_model_type",
            "valid JSON without its 'model_type' key",
            "ValueError: Unrecognized model in <repo>. Should have a `model_type` key …",
            _no_model_type,
        ),
        Corruption(
            "binary",
            "the blob holds binary data that is not UTF-8",
            "OSError: It looks like the config file at '…' is not a valid JSON file.",
            _binary,
        ),
        Corruption(
            "dangling_pointer",
            "the snapshot pointer links to a blob that does not exist",
            "OSError: We couldn't connect to 'https://huggingface.co' … (LocalEntryNotFoundError)",
            _dangling_pointer,
            changes="pointer",
        ),
        Corruption(
            "missing_pointer",
            "the snapshot pointer is gone; the blob is still there",
            "OSError: We couldn't connect to 'https://huggingface.co' … (LocalEntryNotFoundError)",
            _missing_pointer,
            changes="pointer",
        ),
        Corruption(
            "missing_blob",
            "the blob is gone (a cache cleaner); every pointer to it dangles",
            "OSError: We couldn't connect to 'https://huggingface.co' … (LocalEntryNotFoundError)",
            _missing_blob,
        ),
        Corruption(
            "empty_ref",
            "refs/<revision> is an empty file, so the revision resolves to ''",
            "OSError: We couldn't connect to 'https://huggingface.co' … (LocalEntryNotFoundError)",
            _empty_ref,
            changes="ref",
        ),
        Corruption(
            "no_exist",
            "the pointer is gone and .no_exist/<commit>/<file> says the hub has no such file",
            "config.json: ValueError: Unrecognized model …; other files: OSError … does not"
            " appear to have a file named …",
            _no_exist,
            changes="pointer",
        ),
    )
}


def get_corruption(name: object, where: str = "") -> Corruption:
    if not isinstance(name, str) or name not in CORRUPTIONS:
        raise UnknownNameError("corruption", name, CORRUPTIONS, where)
    return CORRUPTIONS[name]
