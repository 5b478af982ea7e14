"""The native interposer, built from its C source with the system's C compiler on first use.

``interposer_library(folder, where)`` returns the shared library, built once into
``<folder>/startup-guard-native/<hash of the source>/`` (the launcher passes the run's temp folder,
which every xdist worker of the run shares): the first process to get there builds it under an
exclusive ``flock`` into a temporary name and moves it into place with ``os.replace``; the others
wait for the lock and find it. Nothing is written anywhere else.

``preload_env(library, env)`` is what a process needs in its environment to load it:
``LD_PRELOAD`` with the library appended to whatever the user's environment preloads already.

The test side only: standard library at import.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from pytest_startup_guard.errors import StartupGuardError

SOURCE = Path(__file__).resolve().with_name("interposer.c")
LIBRARY = "startup_guard_native.so"
FOLDER = "startup-guard-native"
PRELOAD_ENV = "LD_PRELOAD"
# -U_FORTIFY_SOURCE: compilers that fortify by default would redefine open() around the wrappers.
FLAGS = ("-shared", "-fPIC", "-O2", "-U_FORTIFY_SOURCE")
LIBRARIES = ("-ldl", "-lpthread")
BUILD_TIMEOUT = 120.0  # seconds: a compile of one small file, on a loaded machine


class NativeBuildError(StartupGuardError):
    """The interposer cannot be built here: no C compiler, or the compile failed."""


def compiler(where: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The C compiler's command: ``$CC`` (it may carry flags) or ``cc``, found on ``PATH``; a
    clear error naming what is missing otherwise."""
    env = os.environ if env is None else env
    given = env.get("CC", "").strip()
    command = shlex.split(given) if given else ["cc"]
    search = env.get("PATH", os.defpath)
    found = shutil.which(command[0], path=search)
    if found is None:
        what = f"CC={given!r} is not a program" if given else "no 'cc' (and CC is not set)"
        raise NativeBuildError(
            f"{where} needs a C compiler to build the native interposer"
            f" ({SOURCE.name}), and there is none: {what} on PATH={search!r}. Install one (gcc"
            " or clang) or set CC to its path; or launch without native_accesses=True"
        )
    return [found, *command[1:]]


def source_digest() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]


def interposer_library(folder: Path, where: str, env: Mapping[str, str] | None = None) -> Path:
    """The built interposer under ``folder`` (built now if this run has not built it yet)."""
    if not sys.platform.startswith("linux"):
        raise NativeBuildError(
            f"{where}: native accesses need Linux's LD_PRELOAD and glibc; this is {sys.platform}"
        )
    target = folder / FOLDER / source_digest()
    library = target / LIBRARY
    if library.is_file():
        return library
    command = compiler(where, env)
    target.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(target / "build.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # another xdist worker may be building it
        if not library.is_file():
            _build(command, library, where)
    finally:
        os.close(descriptor)
    return library


def _build(command: list[str], library: Path, where: str) -> None:
    partial = library.with_name(f".{LIBRARY}.{os.getpid()}.tmp")
    argv = [*command, *FLAGS, "-o", str(partial), str(SOURCE), *LIBRARIES]
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NativeBuildError(
            f"{where}: building the native interposer failed: {shlex.join(argv)}: {error}"
        ) from None
    if result.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        output = (result.stderr or result.stdout).strip()[-2000:]
        raise NativeBuildError(
            f"{where}: building the native interposer failed (exit status"
            f" {result.returncode}): {shlex.join(argv)}\n{output}"
        )
    os.replace(partial, library)


def preload_env(library: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``LD_PRELOAD`` for a process whose environment is ``env``: its own preloads, then the
    interposer. A path with a space or a colon cannot be preloaded (the loader splits on them)."""
    text = str(library)
    if any(separator in text for separator in (" ", ":")):
        raise NativeBuildError(
            f"the native interposer's path {text!r} has a space or a colon, which LD_PRELOAD"
            " splits on: run pytest with a --basetemp without them"
        )
    existing = env.get(PRELOAD_ENV, "").strip()
    return {PRELOAD_ENV: f"{existing}:{text}" if existing else text}


__all__ = [
    "NativeBuildError",
    "compiler",
    "interposer_library",
    "preload_env",
]
