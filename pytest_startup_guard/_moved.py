"""The flat layout's module paths (``pytest_startup_guard.hubcache`` and the like), kept
importable with a ``DeprecationWarning`` after the modules moved into sub-packages.

The public names have always been re-exported from ``pytest_startup_guard`` and still are; this
only keeps a deep import, or ``python -m pytest_startup_guard.importscan``, from breaking at
once. Six old modules share their name with the package that replaced them (``races``,
``fleet``, ``verdicts``, ``imports``, ``report``, ``targets``): those paths are the packages
now. Built-in modules only, at import: every process under a plan imports the package.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing typing costs every child process ~10 ms

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import CodeType, ModuleType

PACKAGE = "pytest_startup_guard"
REMOVED_IN = "0.3"

MOVED = {
    "_boot": "runtime.boot",
    "_probe": "runtime.probe",
    "childruntime": "runtime.child",
    "controller": "runtime.controller",
    "protocol": "runtime.protocol",
    "observation": "runtime.observation",
    "hublayout": "cache.layout",
    "hubcache": "cache.hubcache",
    "hubenv": "cache.env",
    "corruptions": "cache.corruptions",
    "triggers": "races.triggers",
    "armed": "races.armed",
    "refresher": "races.refresher",
    "hubrace": "races.hubrace",
    "ready": "fleet.ready",
    "ports": "fleet.ports",
    "reaper": "fleet.reaper",
    "timeouts": "fleet.timeouts",
    "importscan": "imports.scan",
    "startmethods": "imports.startmethods",
    "record": "report.record",
    "artifacts": "report.artifacts",
    "reruns": "report.reruns",
    "timeline": "report.timeline",
    "options": "settings.options",
    "seeds": "settings.seeds",
    "session": "settings.session",
}

# ``ready`` is public (``from pytest_startup_guard import ready``): its old path stays, quietly.
QUIET = frozenset({"ready"})


def new_name(old: str) -> str | None:
    """The module an old flat-layout path now lives at, or None for any other name."""
    prefix = PACKAGE + "."
    if not old.startswith(prefix):
        return None
    moved = MOVED.get(old[len(prefix) :])
    return None if moved is None else f"{prefix}{moved}"


class MovedModuleLoader:
    """Hands out the module at its new path, so old and new names are one module object."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        import importlib

        if spec.name.rsplit(".", 1)[1] not in QUIET:
            import warnings

            warnings.warn(
                f"{spec.name} moved to {self.target}; import it from there (public names from"
                f" {PACKAGE}); the old path goes in {REMOVED_IN}",
                DeprecationWarning,
                stacklevel=4,
            )
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its new name."""

    def get_code(self, fullname: str) -> CodeType | None:
        """``python -m <old path>`` (runpy asks for the code, not the module)."""
        import importlib.util

        sys.stderr.write(
            f"startup-guard: python -m {fullname} is deprecated, use python -m {self.target}"
            f" (the old name goes in {REMOVED_IN})\n"
        )
        spec = importlib.util.find_spec(self.target)
        loader = None if spec is None else spec.loader
        get_code = getattr(loader, "get_code", None)
        return None if get_code is None else get_code(self.target)


class MovedModuleFinder:
    """Answers for the old flat-layout paths only; every other name is left to the usual
    finders. It sits last on ``sys.meta_path``, so a real module of that name wins."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        moved = new_name(fullname)
        if moved is None:
            return None
        from importlib.machinery import ModuleSpec

        # Duck-typed: subclassing importlib.abc.Loader would cost every child process an import.
        return ModuleSpec(fullname, MovedModuleLoader(moved))  # type: ignore[arg-type]


def install() -> None:
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
