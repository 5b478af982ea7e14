"""Which file operations the child runtime should not report: the plugin's own.

Building a cache, writing a corruption or opening a race window touches the watched folders
from the test process; those operations are not accesses of the code under test, and a
window's own writes must not trigger another window. A thread-local flag marks them.
Built-in modules only: children import this at boot.
"""

from __future__ import annotations

import _thread
import sys

# One flag for the whole process, kept on ``sys``: a test process that imports the plugin again
# (pytester's inline runs drop the modules each run imported) has two copies of this module, and
# the audit hook of the first copy must see the ``unobserved()`` blocks of the second.
_SHARED = "_startup_guard_unobserved"
_local: _thread._local = getattr(sys, _SHARED, None) or _thread._local()
setattr(sys, _SHARED, _local)


def is_unobserved() -> bool:
    return bool(getattr(_local, "busy", False))


def set_unobserved(value: bool) -> None:
    _local.busy = value


class unobserved:  # lower case: used like a function, ``with unobserved(): ...``
    """File operations of this thread inside the block are the plugin's, not the test's."""

    def __enter__(self) -> None:
        self.previous = is_unobserved()
        _local.busy = True

    def __exit__(self, *exc_info: object) -> None:
        _local.busy = self.previous
