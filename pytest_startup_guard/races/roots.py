"""The roots a test may race under: folders the plugin (or pytest, for the test) owns.

A race changes what is on disk. Only folders made for this test may be changed: its
``shared_dir``, its ``hub_cache``, its ``tmp_path``. A path elsewhere (a real cache, a model
folder a repo was imported from, the user's home), or one that leaves a root through a
symlink, is refused with the roots that are allowed. ``shared_hub_cache`` is shared by every
test of the run and is refused too: racing it would reach other tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pytest_startup_guard.errors import ArgumentTypeError, StartupGuardError

RootsProvider = Callable[[], dict[str, Path]]


class PluginRoots:
    """Names the roots of one test; they are looked up when a race is armed (the fixtures
    that own them may be created after ``hub_race``)."""

    def __init__(
        self, provider: RootsProvider | None = None, refused: RootsProvider | None = None
    ) -> None:
        self._provider = provider
        self._refused = refused

    def roots(self) -> dict[str, Path]:
        return dict(self._provider()) if self._provider is not None else {}

    def check(
        self, path: str | os.PathLike[str], where: str, *, allow_root: bool = False
    ) -> tuple[str, Path, Path]:
        """``(root name, root, path)``, every symlink on the way resolved but the last part
        (a race on a link races the link). Refuses a path under no root, a root itself (unless
        ``allow_root``: a fault that changes nothing on disk may cover a whole root), and the
        run's shared caches."""
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentTypeError(
                f"{where} needs a path (str or os.PathLike), not {type(path).__name__}"
            )
        given = Path(os.path.abspath(os.fspath(path)))
        resolved = Path(os.path.realpath(given.parent)) / given.name
        refused = self._refused() if self._refused is not None else {}
        for name, root in refused.items():
            if _under(resolved, root):
                raise StartupGuardError(
                    f"{where}: {given} is under {name} ({root}), which every test of the run"
                    " shares; race a private copy (hub_cache.copy_of(repo)) or a shared_dir"
                )
        roots = self.roots()
        for name, root in roots.items():
            real_root = Path(os.path.realpath(root))
            if _under(resolved, real_root):
                if resolved == real_root and not allow_root:
                    raise StartupGuardError(
                        f"{where}: {given} is {name} itself; name a file or folder inside it"
                    )
                return name, real_root, resolved
        allowed = ", ".join(f"{name} ({root})" for name, root in roots.items()) or (
            "none: ask for the shared_dir, hub_cache or tmp_path fixture"
        )
        raise StartupGuardError(
            f"{where}: {given} is not under a folder the plugin owns for this test, so it is not"
            f" raced (a race changes what is on disk). Allowed roots: {allowed}"
        )


def _under(path: Path, root: Path) -> bool:
    root_text = str(Path(os.path.realpath(root))).rstrip(os.sep)
    text = str(path)
    return text == root_text or text.startswith(root_text + os.sep)
