"""Writing a file at a path the user gave: whole or not at all, and never through a planted name.

Every file the plugin writes where the user pointed it (the JSON and HTML reports, the
artifacts, ``startup-guard-report merge -o``) is written to a temporary file created
exclusively in the target's own folder, then renamed over the target (``os.replace``):

- a reader never sees half a file, and a failed write leaves the old file as it was;
- the temporary name is random and created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, as
  ``tempfile.mkstemp`` creates it: a symlink or file planted at a name someone could predict
  is never followed nor overwritten (the old ``.NAME.PID.tmp`` could be);
- the rename replaces a symlink at the target itself rather than following it;
- no temporary file stays behind, after success or failure; a target that is a folder is an
  ``IsADirectoryError`` before anything is created (``--startup-guard-html=/tmp`` once made its
  temporary file in ``/``, the folder of ``/tmp``), and a folder that does not exist is a
  ``FileNotFoundError``: no folder is created here.

Unlike ``mkstemp`` the file gets the mode any new file gets (0666 less the umask), as the
``open`` it replaces gave it: a report made 0600 would hide it from a CI's other users.

Standard library only: the ``startup-guard-report`` command starts without pytest.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_ATTEMPTS = 100  # random names tried before giving up, as tempfile does (TMP_MAX is larger)


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, whole or not at all (see the module)."""
    data = text.encode("utf-8")
    _replace(Path(path), lambda handle: handle.write(data))


def copy_atomically(source: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Copy the content of ``source`` to ``path``, whole or not at all (see the module)."""
    with open(source, "rb") as original:
        _replace(Path(path), lambda handle: shutil.copyfileobj(original, handle))


def _replace(path: Path, fill: Callable[[BinaryIO], object]) -> None:
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder; give the path of a file", str(path))
    descriptor, temporary = _create_temporary(path.parent, path.name)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            fill(handle)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _create_temporary(folder: Path, name: str) -> tuple[int, Path]:
    """A new file ``.NAME.<random>.tmp`` in ``folder``, created exclusively: its descriptor."""
    for _ in range(_ATTEMPTS):
        temporary = folder / f".{name}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(temporary, _CREATE, 0o666), temporary
        except FileExistsError:
            continue
    raise FileExistsError(
        errno.EEXIST, f"no free temporary name after {_ATTEMPTS} tries", str(folder)
    )
