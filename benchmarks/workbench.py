"""A test's machinery outside pytest, for benchmarks: a fake cache, the child runtime, races
and a server fleet, set up and torn down the way the fixtures do it."""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pytest_startup_guard import FakeHubCache
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.launcher import FleetLauncher
from pytest_startup_guard.fleet.ports import PortLeases
from pytest_startup_guard.fleet.reaper import Reaper
from pytest_startup_guard.fleet.server_fleet import ServerFleet
from pytest_startup_guard.races.hubrace import HubRace
from pytest_startup_guard.races.roots import PluginRoots
from pytest_startup_guard.runtime.controller import RuntimeController

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

from zoo import CONFIG  # noqa: E402 - the bug zoo's servers and config, as its tests use them
from zoo import command as server_command  # noqa: E402

__all__ = ["CONFIG", "Bench", "first_failure", "server_command", "workbench"]


@dataclass
class Bench:
    folder: Path
    leases: PortLeases
    reaper: Reaper
    counter: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def _test(
        self, seed: int, roots: PluginRoots | None = None, cache: FakeHubCache | None = None
    ) -> Iterator[tuple[Path, HubRace, ServerFleet]]:
        """The child runtime, races and fleets of one test, in a folder of its own; all torn
        down after. Thread-safe: fleets get their env explicitly, nothing global changes."""
        with self.lock:
            self.counter += 1
            number = self.counter
        folder = self.folder / f"test-{number}"
        folder.mkdir(parents=True, exist_ok=True)
        controller = RuntimeController().start()
        if cache is not None:
            controller.watch(cache.root)
        races = HubRace(controller, seed, roots)
        fleets = ServerFleet(
            FleetLauncher(
                controller,
                folder / "fleet",
                self.leases,
                self.reaper,
                default_timeout=60,
                default_cache=cache,
                races=races,
            )
        )
        try:
            yield folder, races, fleets
        finally:
            fleets.stop_all()
            races.close()
            controller.close()
            shutil.rmtree(folder, ignore_errors=True)

    @contextmanager
    def test(self, seed: int = 0) -> Iterator[tuple[FakeHubCache, HubRace, ServerFleet]]:
        """One test's worth: a private cache with acme/tiny, races, fleets."""
        with self.empty_cache_test(seed) as (cache, races, fleets):
            cache.add_model("acme/tiny", CONFIG)
            yield cache, races, fleets

    @contextmanager
    def empty_cache_test(
        self, seed: int = 0
    ) -> Iterator[tuple[FakeHubCache, HubRace, ServerFleet]]:
        """One test's worth on a private cache with no repo yet: the caller adds its own."""
        cache = FakeHubCache(Path(tempfile.mkdtemp(prefix="cache-", dir=self.folder)))
        try:
            with self._test(seed, cache=cache) as (_folder, races, fleets):
                yield cache, races, fleets
        finally:
            shutil.rmtree(cache.root, ignore_errors=True)

    @contextmanager
    def shared_test(self, seed: int = 0) -> Iterator[tuple[Path, HubRace, ServerFleet]]:
        """One test's worth beyond the hub cache: a ``shared_dir`` the races may change, races
        and fleets."""
        shared = Path(tempfile.mkdtemp(prefix="shared-", dir=self.folder))
        try:
            with self._test(seed, PluginRoots(lambda: {"shared_dir": shared})) as (_f, r, f):
                yield shared, r, f
        finally:
            shutil.rmtree(shared, ignore_errors=True)


def first_failure(fleet: Fleet, started: float, *, hung: bool = False) -> float | None:
    """Seconds from ``started`` (the launch) to the first server that exited, or with
    ``hung=True`` also was found hung (the moment a verdict could be given); None if none."""
    moments = [
        s.seconds_to_exit if s.state == "exited" else s.seconds_to_timeout
        for s in fleet.servers
        if s.state == "exited" or (hung and s.state == "hung")
    ]
    found = [moment for moment in moments if moment is not None]
    if not found or fleet.released_t is None:
        return None
    return (fleet.released_t - started) + min(found)


@contextmanager
def workbench() -> Iterator[Bench]:
    folder = Path(tempfile.mkdtemp(prefix="bench-"))
    reaper = Reaper()
    try:
        yield Bench(folder, PortLeases(folder / "ports"), reaper)
    finally:
        reaper.close()
        shutil.rmtree(folder, ignore_errors=True)
