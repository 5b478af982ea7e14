"""pytest-startup-guard: deterministic, seeded tests for start-up races on a shared HF cache.

The public names are re-exported lazily: importing this package (which every child process
of a test does when a plan is set) costs nothing until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0.dev0"

_EXPORTS = {
    "FakeHubCache": "pytest_startup_guard.hubcache",
    "CachedRepo": "pytest_startup_guard.hubcache",
    "CORRUPTIONS": "pytest_startup_guard.corruptions",
    "StartupGuardError": "pytest_startup_guard.errors",
    "UnsafeCacheError": "pytest_startup_guard.errors",
    "UnknownNameError": "pytest_startup_guard.errors",
    "detect_target": "pytest_startup_guard.targets",
}

__all__ = [
    "CORRUPTIONS",
    "CachedRepo",
    "FakeHubCache",
    "StartupGuardError",
    "UnknownNameError",
    "UnsafeCacheError",
    "detect_target",
]

if TYPE_CHECKING:
    from pytest_startup_guard.corruptions import CORRUPTIONS
    from pytest_startup_guard.errors import StartupGuardError, UnknownNameError, UnsafeCacheError
    from pytest_startup_guard.hubcache import CachedRepo, FakeHubCache
    from pytest_startup_guard.targets import detect_target


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_startup_guard' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
