"""A pause point right after an open for writing returns, in the real writer's process only.

The audit hook hears ``open`` BEFORE the call. In ``with open(ref, "w") as f: f.write(commit)``
nothing audited separates the open, which truncates the file, from the write: a process held
before its next operation has already written, and the state "the file is empty" is never
shown to anyone. So the writer's process (``WRITER_STEPS_ENV`` in its environment: the plugin
sets it for ``server_fleet.explore_writer``'s writer alone) wraps ``builtins.open``/``io.open``
and ``os.open``; after an open that may change the file (a mode with ``w``, ``a``, ``x`` or
``+``; flags with ``O_WRONLY``, ``O_RDWR``, ``O_CREAT``, ``O_TRUNC`` or ``O_APPEND``) returns, it
raises the audit event ``OPENED_EVENT`` (path, mode), which the child runtime reports as an
access of that name: the controller may hold the process there.

Built-in modules only (``builtins``, ``io``, ``os``, ``sys``: loaded in every interpreter before
``site``): it is imported at boot.
"""

from __future__ import annotations

import builtins
import io
import os
import sys

from pytest_startup_guard.runtime.child.audit import as_text
from pytest_startup_guard.runtime.child.footprint import WRITE_FLAGS, mode_writes
from pytest_startup_guard.runtime.protocol import OPENED_EVENT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_installed = False


def _opened(result: Any, path: str | None, mode: object, close: Any) -> Any:
    """Raise the audit event for an open that returned; an answer that fails it closes what
    was opened before the error reaches the caller."""
    if path is None:
        return result
    try:
        sys.audit(OPENED_EVENT, path, mode)
    except BaseException:
        close(result)
        raise
    return result


def _close_file(handle: Any) -> None:
    handle.close()


def install() -> None:
    """Wrap the opens of this process (once)."""
    global _installed
    if _installed:
        return
    _installed = True
    original_open = builtins.open
    original_os_open = os.open

    def open(file: Any, *args: Any, **kwargs: Any) -> Any:
        mode = args[0] if args else kwargs.get("mode", "r")
        handle = original_open(file, *args, **kwargs)
        if mode_writes(mode):
            return _opened(handle, as_text(file), mode, _close_file)
        return handle

    def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        descriptor: int = original_os_open(path, flags, *args, **kwargs)
        if type(flags) is int and flags & WRITE_FLAGS:
            _opened(descriptor, as_text(path), flags, os.close)
        return descriptor

    open.__doc__, os_open.__doc__ = original_open.__doc__, original_os_open.__doc__
    os_open.__name__ = "open"
    builtins.open = open
    io.open = open
    os.open = os_open
