"""One access, reported once, in a Python process that also carries the native interposer.

The child runtime's audit hook reports a Python call (``open(path)``) before it runs; the call
then goes on into libc, where the interposer (``interposer.c``) sees it again. The hook's
reply and the libc call come in that order on the same thread, and the controller reads both
on its one thread, so the libc call of a reported access is the next native access of the same
process and thread, with the same operation and path: that one is dropped (answered "go on",
not recorded, told to no listener). An access the hook failed with an errno never reaches libc,
and a Python operation with no wrapped libc call (``os.listdir``: ``opendir``) leaves nothing
that a later native access could match.

The test side only: standard library at import.
"""

from __future__ import annotations

import os
from typing import Any

# seconds: the longest a libc call may follow its audit event. A thread does nothing else in
# between; this only bounds how long an unmatched entry can wait for its call.
_WITHIN = 5.0


class NativeDoubles:
    """The last answered Python access of each (pid, thread), until its libc call comes."""

    def __init__(self) -> None:
        self._last: dict[tuple[int, int], tuple[str, str, float]] = {}

    def answered(self, message: dict[str, Any], failed: bool) -> None:
        """An access message was answered: a Python one (not ``native``) that goes on is kept
        for its libc call; one that fails never makes it."""
        if message.get("native"):
            return
        key = (int(message["pid"]), int(message.get("tid", 0)))
        if failed:
            self._last.pop(key, None)
        else:
            self._last[key] = (str(message["ev"]), _normal(message["path"]), float(message["t"]))

    def is_double(self, message: dict[str, Any]) -> bool:
        """Whether a native access message is the libc call of the Python access its thread
        reported last (it is then forgotten: the call is seen once)."""
        if not message.get("native"):
            return False
        last = self._last.pop((int(message["pid"]), int(message.get("tid", 0))), None)
        if last is None:
            return False
        event, path, t = last
        return (
            event == message["ev"]
            and path == _normal(message["path"])
            and 0.0 <= float(message["t"]) - t <= _WITHIN
        )


def _normal(path: object) -> str:
    return os.path.normpath(str(path))


__all__ = ["NativeDoubles"]
