"""Looks at a path made audit events: ``os.stat``, ``os.lstat``, ``os.access``, ``os.readlink``.

CPython audits opens and listings, not looks; yet the reads that decide a start-up are often
looks (``hf_hub_download``'s ``os.path.exists`` of a pointer, ``try_to_load_from_cache``'s
``os.path.isfile``, ``os.path.realpath``). ``install`` wraps the four ``os`` functions so each
call raises an audit event of the same name first; ``os.path.exists``, ``isfile``, ``isdir``,
``islink``, ``realpath`` and ``pathlib.Path.stat`` look through them. The audit hook
(``audit.hook``) reports a look under the watched folders as it reports an access, and the
controller hands it to the listeners that ask for looks (``RuntimeListener.hears_looks``: a
race, which counts a look of what it changes as meeting the change). The import system calls
``posix.stat`` itself, so imports pay nothing for this.

Built-in modules only (``os``, ``sys``): children import this at interpreter start.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

LOOK_FUNCTIONS = ("stat", "lstat", "access", "readlink")
_MARK = "__startup_guard_look__"


def _looking(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    event = f"os.{name}"
    audit = sys.audit

    def look(*args: Any, **kwargs: Any) -> Any:
        path = args[0] if args else kwargs.get("path")
        if path is not None and "dir_fd" not in kwargs:  # a path relative to a descriptor: not
            audit(event, path)  # one the hook could place
        return original(*args, **kwargs)

    look.__name__ = look.__qualname__ = name
    look.__doc__ = original.__doc__
    look.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(look, _MARK, True)
    return look


def install() -> None:
    """Wrap the ``os`` functions that look at a path (once: a fork keeps them wrapped)."""
    for name in LOOK_FUNCTIONS:
        original = getattr(os, name)
        if not getattr(original, _MARK, False):
            setattr(os, name, _looking(name, original))


def uninstall() -> None:
    """Put the ``os`` functions back (the test process, once it stops watching itself)."""
    for name in LOOK_FUNCTIONS:
        wrapped = getattr(os, name)
        if getattr(wrapped, _MARK, False):
            setattr(os, name, wrapped.__wrapped__)
