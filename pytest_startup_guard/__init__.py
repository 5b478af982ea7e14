"""pytest-startup-guard: deterministic, seeded tests for start-up races on a shared HF cache.

The public names are re-exported lazily: importing this package (which every child process
of a test does when a plan is set) costs nothing until a name is used.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing costs every child process ~10 ms

__version__ = "0.1.0.dev0"

_EXPORTS = {
    "FakeHubCache": "pytest_startup_guard.hubcache",
    "CachedRepo": "pytest_startup_guard.hubcache",
    "CORRUPTIONS": "pytest_startup_guard.corruptions",
    "StartupGuardError": "pytest_startup_guard.errors",
    "UnsafeCacheError": "pytest_startup_guard.errors",
    "UnknownNameError": "pytest_startup_guard.errors",
    "detect_target": "pytest_startup_guard.targets",
    "RACES": "pytest_startup_guard.races",
    "Race": "pytest_startup_guard.races",
    "RaceTarget": "pytest_startup_guard.races",
    "register_race": "pytest_startup_guard.races",
    "on_access": "pytest_startup_guard.triggers",
    "after": "pytest_startup_guard.triggers",
    "chaos": "pytest_startup_guard.triggers",
    "ArmedRace": "pytest_startup_guard.armed",
    "HubRace": "pytest_startup_guard.hubrace",
    "Exploration": "pytest_startup_guard.hubrace",
    "RuntimeController": "pytest_startup_guard.controller",
    "Fleet": "pytest_startup_guard.fleet",
    "Server": "pytest_startup_guard.fleet",
    "ServerFleet": "pytest_startup_guard.fleet",
    "StartupCase": "pytest_startup_guard.verdicts",
    "assert_survives": "pytest_startup_guard.verdicts",
    "assert_fails_closed": "pytest_startup_guard.verdicts",
    "import_race": "pytest_startup_guard.imports",
    "ImportRaceResult": "pytest_startup_guard.imports",
    "ImportRun": "pytest_startup_guard.imports",
    "ImportProbeError": "pytest_startup_guard.imports",
    "ImportRaceProbe": "pytest_startup_guard.imports",
    "scan_background_imports": "pytest_startup_guard.importscan",
    "ScanReport": "pytest_startup_guard.importscan",
    "BackgroundImport": "pytest_startup_guard.importscan",
    "check_start_methods": "pytest_startup_guard.startmethods",
    "check_env_choices": "pytest_startup_guard.startmethods",
    "StartMethodResult": "pytest_startup_guard.startmethods",
    "EnvChoiceResult": "pytest_startup_guard.startmethods",
    "StartupRun": "pytest_startup_guard.startmethods",
    "StartMethodChecker": "pytest_startup_guard.startmethods",
}

__all__ = [
    "CORRUPTIONS",
    "RACES",
    "ArmedRace",
    "BackgroundImport",
    "CachedRepo",
    "EnvChoiceResult",
    "Exploration",
    "FakeHubCache",
    "Fleet",
    "HubRace",
    "ImportProbeError",
    "ImportRaceProbe",
    "ImportRaceResult",
    "ImportRun",
    "Race",
    "RaceTarget",
    "RuntimeController",
    "ScanReport",
    "Server",
    "ServerFleet",
    "StartMethodChecker",
    "StartMethodResult",
    "StartupCase",
    "StartupGuardError",
    "StartupRun",
    "UnknownNameError",
    "UnsafeCacheError",
    "after",
    "assert_fails_closed",
    "assert_survives",
    "chaos",
    "check_env_choices",
    "check_start_methods",
    "detect_target",
    "import_race",
    "on_access",
    "register_race",
    "scan_background_imports",
]

if TYPE_CHECKING:
    from typing import Any

    from pytest_startup_guard.armed import ArmedRace
    from pytest_startup_guard.controller import RuntimeController
    from pytest_startup_guard.corruptions import CORRUPTIONS
    from pytest_startup_guard.errors import StartupGuardError, UnknownNameError, UnsafeCacheError
    from pytest_startup_guard.fleet import Fleet, Server, ServerFleet
    from pytest_startup_guard.hubcache import CachedRepo, FakeHubCache
    from pytest_startup_guard.hubrace import Exploration, HubRace
    from pytest_startup_guard.imports import (
        ImportProbeError,
        ImportRaceProbe,
        ImportRaceResult,
        ImportRun,
        import_race,
    )
    from pytest_startup_guard.importscan import (
        BackgroundImport,
        ScanReport,
        scan_background_imports,
    )
    from pytest_startup_guard.races import RACES, Race, RaceTarget, register_race
    from pytest_startup_guard.startmethods import (
        EnvChoiceResult,
        StartMethodChecker,
        StartMethodResult,
        StartupRun,
        check_env_choices,
        check_start_methods,
    )
    from pytest_startup_guard.targets import detect_target
    from pytest_startup_guard.triggers import after, chaos, on_access
    from pytest_startup_guard.verdicts import StartupCase, assert_fails_closed, assert_survives


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_startup_guard' has no attribute {name!r}")
    import importlib  # not at package import: every process under a plan imports the package

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
