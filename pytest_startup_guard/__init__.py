"""pytest-startup-guard: deterministic, seeded tests for start-up races on a shared HF cache.

The public names are the ``from <module> import <name> as <name>`` lines of the
``if TYPE_CHECKING:`` block below, and nothing else: that block is the one list.

- Type checkers read it as it is: each name is an explicit re-export with its real type
  (``mypy --strict``), and, since ``__getattr__`` is hidden from them, a misspelt name is an
  error rather than ``Any``.
- At run time the block never runs. Importing the package loads built-in modules and
  ``_version`` only (every process of a test under a plan imports it, at interpreter start).
  The first time a public name (or ``__all__``) is asked for, ``__getattr__`` reads the block
  from this file's source with ``ast`` into a map of name to module (1-2 ms, once, and only in
  a process that uses the API, where the modules behind the names, and pytest, have imported
  ``ast`` anyway); a name is then imported from its module on first use and kept in the
  module's globals.
- ``__all__`` and ``dir()`` come from the same map.

To make a name public, add its line to the block (``as`` the same name) and show it in the
docs (README.md or docs/*.md): ``tests/test_public_api.py`` checks both.
"""

from pytest_startup_guard._version import __version__ as __version__

TYPE_CHECKING = False  # not typing's: importing typing costs every child process ~10 ms

if TYPE_CHECKING:
    from pytest_startup_guard.cache.corruptions import CORRUPTIONS as CORRUPTIONS
    from pytest_startup_guard.cache.file_corruptions import FILE_CORRUPTIONS as FILE_CORRUPTIONS
    from pytest_startup_guard.cache.hubcache import CachedRepo as CachedRepo
    from pytest_startup_guard.cache.hubcache import FakeHubCache as FakeHubCache
    from pytest_startup_guard.cache.sources import RepoSourceError as RepoSourceError
    from pytest_startup_guard.errors import ArgumentTypeError as ArgumentTypeError
    from pytest_startup_guard.errors import ExpiredFixtureError as ExpiredFixtureError
    from pytest_startup_guard.errors import InvalidArgumentError as InvalidArgumentError
    from pytest_startup_guard.errors import NotInCacheError as NotInCacheError
    from pytest_startup_guard.errors import StartupGuardError as StartupGuardError
    from pytest_startup_guard.errors import UnknownNameError as UnknownNameError
    from pytest_startup_guard.errors import UnsafeCacheError as UnsafeCacheError
    from pytest_startup_guard.faults.fs_error import fs_error as fs_error
    from pytest_startup_guard.faults.interleave import interleave as interleave
    from pytest_startup_guard.faults.listen_late import listen_late as listen_late
    from pytest_startup_guard.faults.lock_not_exclusive import (
        lock_not_exclusive as lock_not_exclusive,
    )
    from pytest_startup_guard.faults.network_fs import network_fs as network_fs
    from pytest_startup_guard.faults.port_base import PortHit as PortHit
    from pytest_startup_guard.faults.port_stolen import port_stolen as port_stolen
    from pytest_startup_guard.faults.port_taken import port_taken as port_taken
    from pytest_startup_guard.faults.same_port import same_port as same_port
    from pytest_startup_guard.fleet import ready as ready
    from pytest_startup_guard.fleet.explore.writer import WriterExploration as WriterExploration
    from pytest_startup_guard.fleet.explore.writer import WriterPair as WriterPair
    from pytest_startup_guard.fleet.explore.writer_steps import WriterStep as WriterStep
    from pytest_startup_guard.fleet.fleet import Fleet as Fleet
    from pytest_startup_guard.fleet.load import cpu_load as cpu_load
    from pytest_startup_guard.fleet.server import Server as Server
    from pytest_startup_guard.fleet.server_fleet import ServerFleet as ServerFleet
    from pytest_startup_guard.fleet.workers import Worker as Worker
    from pytest_startup_guard.imports.probe import ImportProbeError as ImportProbeError
    from pytest_startup_guard.imports.probe import ImportRaceProbe as ImportRaceProbe
    from pytest_startup_guard.imports.probe import ImportRaceResult as ImportRaceResult
    from pytest_startup_guard.imports.probe import import_race as import_race
    from pytest_startup_guard.imports.scan import ScanReport as ScanReport
    from pytest_startup_guard.imports.scan import scan_background_imports as scan_background_imports
    from pytest_startup_guard.imports.startmethods import StartMethodChecker as StartMethodChecker
    from pytest_startup_guard.imports.startmethods import check_env_choices as check_env_choices
    from pytest_startup_guard.imports.startmethods import (
        check_start_methods as check_start_methods,
    )
    from pytest_startup_guard.imports.startup_runs import EnvChoiceResult as EnvChoiceResult
    from pytest_startup_guard.imports.startup_runs import StartMethodResult as StartMethodResult
    from pytest_startup_guard.races.armed import ArmedRace as ArmedRace
    from pytest_startup_guard.races.base import PathTarget as PathTarget
    from pytest_startup_guard.races.base import Race as Race
    from pytest_startup_guard.races.base import RaceTarget as RaceTarget
    from pytest_startup_guard.races.catalog import RACES as RACES
    from pytest_startup_guard.races.catalog import register_race as register_race
    from pytest_startup_guard.races.exploration import AccessPoint as AccessPoint
    from pytest_startup_guard.races.exploration import Exploration as Exploration
    from pytest_startup_guard.races.exploration import PointOutcome as PointOutcome
    from pytest_startup_guard.races.held_locks import LockHeld as LockHeld
    from pytest_startup_guard.races.held_locks import LockHeldForGood as LockHeldForGood
    from pytest_startup_guard.races.hubrace import HubRace as HubRace
    from pytest_startup_guard.races.triggers import after as after
    from pytest_startup_guard.races.triggers import chaos as chaos
    from pytest_startup_guard.races.triggers import on_access as on_access
    from pytest_startup_guard.races.triggers import placed as placed
    from pytest_startup_guard.remote.hub_remote import HubRemote as HubRemote
    from pytest_startup_guard.remote.repos import RemoteCommit as RemoteCommit
    from pytest_startup_guard.remote.server import RemoteRequest as RemoteRequest
    from pytest_startup_guard.remote.wire_faults import WireFault as WireFault
    from pytest_startup_guard.remote.wire_faults import drop_connection as drop_connection
    from pytest_startup_guard.remote.wire_faults import server_error as server_error
    from pytest_startup_guard.remote.wire_faults import slow_body as slow_body
    from pytest_startup_guard.remote.wire_faults import wrong_etag as wrong_etag
    from pytest_startup_guard.remote.writer import WriterCommand as WriterCommand
    from pytest_startup_guard.runtime.controller import RuntimeController as RuntimeController
    from pytest_startup_guard.runtime.events import (
        RuntimeListener as RuntimeListener,
    )
    from pytest_startup_guard.targets.detection import detect_target as detect_target
    from pytest_startup_guard.verdicts.cases import StartupCase as StartupCase
    from pytest_startup_guard.verdicts.in_process import (
        assert_fails_closed as assert_fails_closed,
    )
    from pytest_startup_guard.verdicts.in_process import assert_survives as assert_survives

_public: dict[str, str] = {}  # name -> module, read from the block above on first use


def _public_names() -> dict[str, str]:
    """The ``as``-re-exports of the ``if TYPE_CHECKING:`` block, read from this file once."""
    if not _public:
        import ast  # here, not at import: a process that never uses the API never pays for it

        with open(__file__, "rb") as source:
            tree = ast.parse(source.read(), __file__)
        found = {
            alias.name: statement.module
            for node in tree.body
            if isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
            for statement in node.body
            if isinstance(statement, ast.ImportFrom) and statement.module
            for alias in statement.names
            if alias.asname == alias.name
        }
        if not found:
            raise ImportError(f"{__file__}: no public names in its TYPE_CHECKING block")
        _public.update(found)  # at once: another thread never sees half the names
    return _public


if not TYPE_CHECKING:  # hidden from type checkers: only the names above exist for them

    def __getattr__(name: str) -> object:
        if name == "__all__":
            value: object = sorted(_public_names())
        elif name.startswith("__") or name not in _public_names():
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        else:
            # ``from module import name`` semantics: a submodule (``ready``) is imported too.
            module = __import__(_public_names()[name], fromlist=[name])
            value = getattr(module, name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_public_names()})
