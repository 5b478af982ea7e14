"""The one rewrite-in-place race: a file truncated, then written, under its own name.

``blob_rewrite`` (a hub blob, as rsync ``--inplace`` or ``cp`` onto it does), ``file_rewrite``
and ``partial_write`` (any file) are this race on different targets: ``RewritesInPlace`` gives
them the share already ``written`` when the window opens, the open (the file truncated, that
share written) and the close (the rest written). Copy on write holds: the file is first given
its own inode (``break_hard_link``), so a rewrite never writes through a hard link into a
source folder or cache a repo was imported from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pytest_startup_guard.cache.layout import break_hard_link
from pytest_startup_guard.errors import InvalidArgumentError


@dataclass
class InPlaceRewrite:
    """A file in the middle of its rewrite: its whole content, and the handle open on it, the
    file truncated and its first ``cut`` bytes written; the rest is written when it closes."""

    path: Path
    content: bytes
    handle: IO[bytes]
    cut: int


class RewritesInPlace:
    """What the rewrite-in-place races share; put it before their ``Race`` base."""

    changes_names = False  # rewritten in place: a listing shows the same names

    def __init__(self, written: float = 0.0) -> None:
        if not is_share(written):
            raise InvalidArgumentError(
                f"invalid written={written!r} for {type(self).__name__}(): expected a share from"
                " 0 to below 1"
            )
        self.written = written

    def start_rewrite(self, path: Path) -> InPlaceRewrite:
        """Truncate ``path`` and write the share ``written`` of its content."""
        break_hard_link(path)  # copy on write: never reach a source the file was linked from
        content = path.read_bytes()
        cut = int(len(content) * self.written)
        handle = open(path, "wb")  # noqa: SIM115 - the rest is written when the window closes
        handle.write(content[:cut])
        handle.flush()
        return InPlaceRewrite(path, content, handle, cut)

    @staticmethod
    def finish_rewrite(rewrite: InPlaceRewrite | None) -> None:
        """Write the rest (all of it again where the handle was closed meanwhile)."""
        if rewrite is None:
            return
        handle, cut = rewrite.handle, rewrite.cut
        if handle.closed:
            break_hard_link(rewrite.path)  # copy on write here too: never reach a source
            handle, cut = open(rewrite.path, "wb"), 0  # noqa: SIM115
        with handle:
            handle.write(rewrite.content[cut:])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(written={self.written})"


def is_share(value: object) -> bool:
    """A number from 0 to below 1 (not a bool, not nan)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value < 1.0
