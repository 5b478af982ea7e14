"""The report, HTML and artifacts paths, checked before the first test runs.

A path that cannot be written used to fail late: the report after the whole run, the artifacts
only when a test failed, and a report in a folder that does not exist created that folder
wherever the path pointed. Each is checked in ``pytest_configure`` instead, and a bad one is a
``pytest.UsageError`` that names the setting, the value, where it came from and what is wrong:

- ``--startup-guard-report`` and ``--startup-guard-html`` name a file: its folder must exist and
  be writable (no folder is ever created for it), the path must not be a folder, and an
  existing file there must be writable.
- ``--startup-guard-artifacts`` names a folder, made at the first failed start-up test: if it
  exists it must be a writable folder, not a file; if not, the nearest folder above it that
  exists must be a folder (not a file) and writable.
- No two of the three may be one file once ``..`` and symbolic links are resolved
  (``--startup-guard-html=a/../out.json`` beside ``--startup-guard-report=out.json`` would
  have one overwrite the other).

A relative path is relative to where pytest was started, as the report resolves it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_startup_guard.settings.options import Setting, name_and_place


def resolve(value: str, invocation_dir: Path) -> Path:
    """``~`` expanded; a relative path taken from where pytest was started."""
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else invocation_dir / path


def check_output_paths(settings: dict[str, Setting], invocation_dir: Path) -> None:
    """Refuse, with a ``pytest.UsageError``, a report, HTML or artifacts path that cannot be
    written, or two of them that are one file (see the module's docs)."""
    outputs: dict[str, str] = {}  # the real path (``..`` and links resolved) -> whose
    for name in ("report", "html", "artifacts"):
        setting = settings[name]
        if setting.value is None:
            continue
        path = resolve(str(setting.value), invocation_dir)
        if name == "artifacts":
            _check_folder(path, _named(setting))
        else:
            _check_file(path, _named(setting))
        real = os.path.realpath(path)
        other = outputs.get(real)
        if other is not None:
            raise pytest.UsageError(
                f"invalid {_named(setting)}: {path} is also {other}"
                + ("" if str(path) == real else f" (both are {real})")
                + "; give the JSON report, the HTML report and the artifacts a path each"
            )
        outputs[real] = _named(setting)


def _named(setting: Setting) -> str:
    """``--startup-guard-html '/tmp' (command line)``."""
    return name_and_place(setting.source, str(setting.value))


def _check_file(path: Path, named: str) -> None:
    if path.is_dir():
        raise pytest.UsageError(
            f"invalid {named}: {path} is a folder; expected a file path in it, such as"
            f" {path / 'startup-guard.json'}"
        )
    _check_writable_folder(path.parent, named, what="its folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise pytest.UsageError(f"invalid {named}: {path} exists and cannot be written")


def _check_folder(path: Path, named: str) -> None:
    if path.exists():
        if not path.is_dir():
            raise pytest.UsageError(
                f"invalid {named}: {path} is a file; expected a folder (new or existing)"
            )
        _check_writable_folder(path, named, what="the folder")
        return
    existing = next(parent for parent in path.parents if parent.exists())
    _check_writable_folder(existing, named, what="above it,")


def _check_writable_folder(folder: Path, named: str, *, what: str) -> None:
    """``folder`` exists, is a folder, and files can be made in it."""
    if not folder.exists():
        raise pytest.UsageError(
            f"invalid {named}: {what} {folder} does not exist; create it first (the plugin"
            " creates no folder for a report)"
        )
    if not folder.is_dir():
        raise pytest.UsageError(f"invalid {named}: {what} {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"invalid {named}: {what} {folder} is not writable")


__all__ = ["check_output_paths", "resolve"]
