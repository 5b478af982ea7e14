"""The on-disk layout of a Hugging Face hub cache, as huggingface_hub writes it.

Pure helpers: names, etags, commits and the file operations that keep a cache readable while
other processes read it (every write here is atomic). ``FakeHubCache`` builds on them.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import TypeVar

from pytest_startup_guard.errors import InvalidArgumentError

_Content = TypeVar("_Content")  # what a repo's file name maps to: its etag, its bytes

REPO_TYPES = ("model", "dataset", "space")

# Files the hub stores with Git LFS, hence with a sha256 etag (huggingface_hub names the blob
# after the LFS oid). Anything larger than LFS_THRESHOLD_BYTES is LFS too, as on the hub.
LFS_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".h5",
    ".msgpack",
    ".onnx",
    ".gguf",
    ".npz",
    ".npy",
    ".pkl",
    ".tflite",
    ".ot",
    ".parquet",
    ".arrow",
    ".zip",
    ".gz",
)
LFS_THRESHOLD_BYTES = 10 * 1024 * 1024

FileContent = Mapping[str, object] | list[object] | str | bytes

# What a file system takes: a name of at most 255 bytes (NAME_MAX), a path far from PATH_MAX
# (4096) once it lies under a cache's snapshot folder.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 2048
_REF_BAD_CHARACTERS = frozenset("/ ~^:?*[\\")

_REPO_ID = re.compile(r"^(?:[\w\-.]+/)?[\w\-.]+$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def validate_repo_id(repo_id: object) -> str:
    """Return ``repo_id`` if the hub would accept it, else raise ``ValueError`` naming it."""
    if (
        not isinstance(repo_id, str)
        or not _REPO_ID.match(repo_id)
        or "--" in repo_id
        or ".." in repo_id
        or repo_id.startswith(("-", "."))
        or repo_id.endswith(("-", "."))
        or len(repo_id) > 96
    ):
        raise InvalidArgumentError(
            f"invalid repo id {repo_id!r}: expected 'name' or 'org/name' made of letters, digits,"
            " '-', '_' and '.', without '--' or '..', at most 96 characters"
        )
    return repo_id


def validate_repo_type(repo_type: object) -> str:
    if repo_type not in REPO_TYPES:
        raise InvalidArgumentError(
            f"invalid repo type {repo_type!r}: expected one of {', '.join(REPO_TYPES)}"
        )
    assert isinstance(repo_type, str)
    return repo_type


def validate_filename(filename: object) -> str:
    """A path inside a repo: relative, '/'-separated, no '..' and no empty parts, each part a
    name the file system takes (no NUL or control character, at most 255 bytes)."""
    if not isinstance(filename, str) or not filename:
        raise InvalidArgumentError(
            f"invalid file name {filename!r}: expected a non-empty relative path"
        )
    parts = PurePosixPath(filename).parts
    given_parts = filename.split("/")  # PurePosixPath drops a '.' part: 'a/./b' is 'a/b'
    if filename.startswith("/") or "\\" in filename or any(p in ("..", ".") for p in given_parts):
        raise InvalidArgumentError(
            f"invalid file name {filename!r}: expected a relative path inside the repo"
            " ('config.json', 'sub/dir/file.txt'), without '..', '.' or a leading '/'"
        )
    problem = name_problem(filename) or next(filter(None, map(_part_problem, parts)), None)
    if problem is not None:
        raise InvalidArgumentError(
            f"invalid file name {filename!r}: {problem}; expected a relative path whose parts"
            f" the file system takes, at most {MAX_NAME_BYTES} bytes each and {MAX_PATH_BYTES}"
            " in all"
        )
    return str(PurePosixPath(*parts))


def name_problem(name: str) -> str | None:
    """What keeps ``name`` from being a file or ref name: a NUL or control character, or text
    that is not valid Unicode."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode (a lone surrogate cannot be written as UTF-8)"
    if "\x00" in name:
        return "it holds a NUL character"
    control = next((char for char in name if ord(char) < 32 or ord(char) == 127), None)
    if control is not None:
        return f"it holds the control character {control!r}"
    if size > MAX_PATH_BYTES:
        return f"it is {size} bytes long"
    return None


def _part_problem(part: str) -> str | None:
    size = len(part.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        return f"its part {part[:20]!r}... is {size} bytes long"
    return None


def checked_names(names: Iterable[object], owner: str) -> dict[str, str]:
    """Each of ``names`` (a repo's files) checked and normalised: normalised -> as given. Two
    names of one file (``'a/b'`` and ``'a//b'``), or a file that another name puts in a folder
    of the same name (``'a'`` and ``'a/b.json'``), are refused, naming both."""
    found: dict[str, str] = {}
    for given in names:
        name = validate_filename(given)
        if name in found:
            raise InvalidArgumentError(
                f"invalid files for {owner}: {given!r} and {found[name]!r} name the same file"
                f" ({name!r}); give each file once"
            )
        found[name] = str(given)
    folder_clash(found, owner)
    return found


def folder_clash(names: Mapping[str, str], owner: str) -> None:
    """Refuse a name that is a file where another name needs a folder (``names``: normalised
    -> as given)."""
    for name, given in names.items():
        parts = name.split("/")
        for end in range(1, len(parts)):
            folder = "/".join(parts[:end])
            if folder in names:
                raise InvalidArgumentError(
                    f"invalid files for {owner}: {names[folder]!r} is a file, and {given!r}"
                    f" puts a file in a folder of the same name; a path is a file or a folder,"
                    " not both"
                )


def file_of(
    files: Mapping[str, _Content],
    filename: str,
    owner: str,
    error: type[Exception],
    given: str | None = None,
) -> _Content:
    """``files[filename]``; a file ``owner`` (``org/name@main``) lacks is ``error``, which names
    it as ``given`` (the caller's spelling, where ``filename`` is normalised) and lists the
    files it has."""
    if filename not in files:
        known = ", ".join(sorted(files)) or "none"
        raise error(f"{owner} has no file {given or filename!r}; its files: {known}")
    return files[filename]


def validate_revision(revision: object) -> str:
    """A branch or tag name that git and the file system take (``refs/<revision>``)."""
    problem = (
        "it is not a non-empty str"
        if not isinstance(revision, str) or not revision
        else name_problem(revision) or _ref_problem(revision)
    )
    if problem is not None:
        raise InvalidArgumentError(
            f"invalid revision {revision!r}: {problem}; expected a branch or tag name such as"
            " 'main' or 'v2': no '/', space, '~^:?*[\\', '..' or '@{', not starting with '.'"
            f" or '-', not ending with '.' or '.lock', at most {MAX_NAME_BYTES} bytes"
        )
    assert isinstance(revision, str)
    return revision


def _ref_problem(revision: str) -> str | None:
    """What git's ``check-ref-format`` refuses in a one-part ref name."""
    bad = next((char for char in revision if char in _REF_BAD_CHARACTERS), None)
    if bad is not None:
        return f"it holds {bad!r}"
    for part in ("..", "@{"):
        if part in revision:
            return f"it holds {part!r}"
    if revision.startswith((".", "-")) or revision.endswith(".") or revision == "@":
        return "git takes no such ref name"
    if revision.endswith(".lock"):
        return "it ends with '.lock'"
    size = len(revision.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        return f"it is {size} bytes long"
    return None


def repo_folder_name(repo_id: str, repo_type: str = "model") -> str:
    """``models--org--name``: huggingface_hub's ``repo_folder_name``."""
    return "--".join([f"{repo_type}s", *repo_id.split("/")])


def git_blob_sha1(data: bytes) -> str:
    """The git blob id the hub uses as etag of regular files."""
    digest = hashlib.sha1(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def is_lfs(filename: str, size: int, threshold: int = LFS_THRESHOLD_BYTES) -> bool:
    return filename.endswith(LFS_SUFFIXES) or size > threshold


def etag_for(filename: str, data: bytes, threshold: int = LFS_THRESHOLD_BYTES) -> str:
    if is_lfs(filename, len(data), threshold):
        return hashlib.sha256(data).hexdigest()
    return git_blob_sha1(data)


def file_etag(path: Path, filename: str, threshold: int = LFS_THRESHOLD_BYTES) -> str:
    """``etag_for`` of a file on disk, read in chunks (a model's weights need not fit in memory)."""
    size = os.stat(path).st_size
    if is_lfs(filename, size, threshold):
        digest = hashlib.sha256()
    else:
        digest = hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def commit_for(repo_type: str, repo_id: str, etags: Mapping[str, str]) -> str:
    """A 40-hex commit id derived from the content only: equal in every worker and every run."""
    digest = hashlib.sha1(f"{repo_type}/{repo_id}\n".encode())
    for name in sorted(etags):
        digest.update(f"{name} {etags[name]}\n".encode())
    return digest.hexdigest()


def is_commit(value: str) -> bool:
    return bool(_COMMIT.match(value))


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


def atomic_write(path: Path, data: bytes) -> None:
    """Write then rename: readers see the old file or the new one, never a partial one."""
    tmp = _tmp_name(path)
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


# Where os.link cannot make a hard link and a copy can stand in: another file system, a file
# the kernel will not let this user link (fs.protected_hardlinks), too many links, no support.
_LINK_FALLBACK_ERRNOS = frozenset(
    {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}
)


def atomic_link_or_copy(source: Path, path: Path) -> bool:
    """Put ``source``'s content at ``path`` in one rename: a hard link where the file system
    allows it, else a copy. Returns True if it linked. ``source`` is only read; copy on write
    (``break_hard_link``) keeps every later in-place write away from it."""
    tmp = _tmp_name(path)
    try:
        os.link(source, tmp)
        linked = True
    except OSError as error:
        if error.errno not in _LINK_FALLBACK_ERRNOS:
            raise
        shutil.copyfile(source, tmp)  # content only: a fresh, writable file of this cache
        linked = False
    os.replace(tmp, path)
    return linked


def relative_link_target(link: Path, target: Path) -> str:
    """The relative path huggingface_hub's ``_create_symlink`` writes (``../../blobs/<etag>``)."""
    return os.path.relpath(target, link.parent)


def atomic_symlink(link: Path, target: Path) -> None:
    """Point ``link`` at ``target`` (relative), replacing any existing link in one rename."""
    tmp = _tmp_name(link)
    os.symlink(relative_link_target(link, target), tmp)
    os.replace(tmp, link)


def break_hard_link(path: Path) -> None:
    """Copy on write: give ``path`` an inode of its own before anything writes to it in place.

    Per-test copies share blobs with the shared cache through hard links, and repos added
    with ``add_from_folder`` / ``add_from_cache`` share them with their source; an in-place
    write to a shared inode would corrupt every other test's copy, or the user's own files. The
    file it leaves is writable by its owner (a read-only source gives read-only links); its
    mode is changed only once no other name shares the inode.
    """
    status = os.stat(path)
    writable = stat.S_IMODE(status.st_mode) | stat.S_IWUSR
    if status.st_nlink > 1:
        tmp = _tmp_name(path)
        shutil.copy2(path, tmp)
        os.chmod(tmp, writable)
        os.replace(tmp, path)
    elif not status.st_mode & stat.S_IWUSR:
        os.chmod(path, writable)
