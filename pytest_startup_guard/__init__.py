"""pytest-startup-guard: deterministic, seeded tests for start-up races on a shared HF cache.

The public names are re-exported lazily: importing this package (which every child process
of a test does when a plan is set) costs nothing until a name is used.
"""

from __future__ import annotations

from pytest_startup_guard import _moved
from pytest_startup_guard._version import __version__ as __version__

TYPE_CHECKING = False  # not typing's: importing typing costs every child process ~10 ms

_EXPORTS = {
    "FakeHubCache": "pytest_startup_guard.cache.hubcache",
    "CachedRepo": "pytest_startup_guard.cache.hubcache",
    "RepoSourceError": "pytest_startup_guard.cache.sources",
    "CORRUPTIONS": "pytest_startup_guard.cache.corruptions",
    "StartupGuardError": "pytest_startup_guard.errors",
    "UnsafeCacheError": "pytest_startup_guard.errors",
    "UnknownNameError": "pytest_startup_guard.errors",
    "detect_target": "pytest_startup_guard.targets.detection",
    "RACES": "pytest_startup_guard.races.catalog",
    "Race": "pytest_startup_guard.races.catalog",
    "RaceTarget": "pytest_startup_guard.races.catalog",
    "PathTarget": "pytest_startup_guard.races.catalog",
    "register_race": "pytest_startup_guard.races.catalog",
    "on_access": "pytest_startup_guard.races.triggers",
    "after": "pytest_startup_guard.races.triggers",
    "chaos": "pytest_startup_guard.races.triggers",
    "placed": "pytest_startup_guard.races.triggers",
    "ArmedRace": "pytest_startup_guard.races.armed",
    "HubRace": "pytest_startup_guard.races.hubrace",
    "Exploration": "pytest_startup_guard.races.hubrace",
    "RuntimeController": "pytest_startup_guard.runtime.controller",
    "Fleet": "pytest_startup_guard.fleet.fleet",
    "Server": "pytest_startup_guard.fleet.fleet",
    "ServerFleet": "pytest_startup_guard.fleet.server_fleet",
    "FleetExploration": "pytest_startup_guard.fleet.exploration",
    "AccessPoint": "pytest_startup_guard.fleet.exploration",
    "PointOutcome": "pytest_startup_guard.fleet.exploration",
    "cpu_load": "pytest_startup_guard.fleet.load",
    "port_taken": "pytest_startup_guard.fleet.port_faults",
    "same_port": "pytest_startup_guard.fleet.port_faults",
    "PortTaken": "pytest_startup_guard.fleet.port_faults",
    "SamePort": "pytest_startup_guard.fleet.port_faults",
    "PortHit": "pytest_startup_guard.fleet.port_faults",
    "ArmedPortFault": "pytest_startup_guard.fleet.port_faults",
    "StartupCase": "pytest_startup_guard.verdicts.cases",
    "assert_survives": "pytest_startup_guard.verdicts.in_process",
    "assert_fails_closed": "pytest_startup_guard.verdicts.in_process",
    "import_race": "pytest_startup_guard.imports.probe",
    "ImportRaceResult": "pytest_startup_guard.imports.probe",
    "ImportRun": "pytest_startup_guard.imports.probe",
    "ImportProbeError": "pytest_startup_guard.imports.probe",
    "ImportRaceProbe": "pytest_startup_guard.imports.probe",
    "scan_background_imports": "pytest_startup_guard.imports.scan",
    "ScanReport": "pytest_startup_guard.imports.scan",
    "BackgroundImport": "pytest_startup_guard.imports.scan",
    "check_start_methods": "pytest_startup_guard.imports.startmethods",
    "check_env_choices": "pytest_startup_guard.imports.startmethods",
    "StartMethodResult": "pytest_startup_guard.imports.startmethods",
    "EnvChoiceResult": "pytest_startup_guard.imports.startmethods",
    "StartupRun": "pytest_startup_guard.imports.startmethods",
    "StartMethodChecker": "pytest_startup_guard.imports.startmethods",
}

# Modules that are public as a whole: ``from pytest_startup_guard import ready``.
_MODULES = {"ready": "pytest_startup_guard.fleet.ready"}

__all__ = [
    "CORRUPTIONS",
    "RACES",
    "AccessPoint",
    "ArmedPortFault",
    "ArmedRace",
    "BackgroundImport",
    "CachedRepo",
    "EnvChoiceResult",
    "Exploration",
    "FakeHubCache",
    "Fleet",
    "FleetExploration",
    "HubRace",
    "ImportProbeError",
    "ImportRaceProbe",
    "ImportRaceResult",
    "ImportRun",
    "PathTarget",
    "PointOutcome",
    "PortHit",
    "PortTaken",
    "Race",
    "RaceTarget",
    "RepoSourceError",
    "RuntimeController",
    "SamePort",
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
    "cpu_load",
    "detect_target",
    "import_race",
    "on_access",
    "placed",
    "port_taken",
    "ready",
    "register_race",
    "same_port",
    "scan_background_imports",
]

if TYPE_CHECKING:
    from typing import Any

    from pytest_startup_guard.cache.corruptions import CORRUPTIONS
    from pytest_startup_guard.cache.hubcache import CachedRepo, FakeHubCache
    from pytest_startup_guard.cache.sources import RepoSourceError
    from pytest_startup_guard.errors import StartupGuardError, UnknownNameError, UnsafeCacheError
    from pytest_startup_guard.fleet import ready
    from pytest_startup_guard.fleet.exploration import AccessPoint, FleetExploration, PointOutcome
    from pytest_startup_guard.fleet.fleet import Fleet, Server
    from pytest_startup_guard.fleet.load import cpu_load
    from pytest_startup_guard.fleet.port_faults import (
        ArmedPortFault,
        PortHit,
        PortTaken,
        SamePort,
        port_taken,
        same_port,
    )
    from pytest_startup_guard.fleet.server_fleet import ServerFleet
    from pytest_startup_guard.imports.probe import (
        ImportProbeError,
        ImportRaceProbe,
        ImportRaceResult,
        ImportRun,
        import_race,
    )
    from pytest_startup_guard.imports.scan import (
        BackgroundImport,
        ScanReport,
        scan_background_imports,
    )
    from pytest_startup_guard.imports.startmethods import (
        EnvChoiceResult,
        StartMethodChecker,
        StartMethodResult,
        StartupRun,
        check_env_choices,
        check_start_methods,
    )
    from pytest_startup_guard.races.armed import ArmedRace
    from pytest_startup_guard.races.catalog import (
        RACES,
        PathTarget,
        Race,
        RaceTarget,
        register_race,
    )
    from pytest_startup_guard.races.hubrace import Exploration, HubRace
    from pytest_startup_guard.races.triggers import after, chaos, on_access, placed
    from pytest_startup_guard.runtime.controller import RuntimeController
    from pytest_startup_guard.targets.detection import detect_target
    from pytest_startup_guard.verdicts.cases import StartupCase
    from pytest_startup_guard.verdicts.in_process import assert_fails_closed, assert_survives


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    whole = _MODULES.get(name)
    if module is None and whole is None:
        raise AttributeError(f"module 'pytest_startup_guard' has no attribute {name!r}")
    import importlib  # not at package import: every process under a plan imports the package

    if whole is not None:
        value = importlib.import_module(whole)
    else:
        value = getattr(importlib.import_module(str(module)), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS, *_MODULES])


_moved.install()
