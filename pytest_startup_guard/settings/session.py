"""What the plugin knows for a whole run: resolved settings, the run seed, the target."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pytest_startup_guard.settings.options import OPTIONS, Setting, resolve
from pytest_startup_guard.settings.seeds import (
    draw_run_seed,
    replay_command,
    seed_for_test,
    stress_run_seed,
)


@dataclass
class GuardSession:
    target: str
    target_reason: str
    settings: dict[str, Setting]
    run_seed: int
    seed_source: str
    warnings: list[str] = field(default_factory=list)
    stress_rounds: dict[str, int] = field(default_factory=dict)  # nodeid -> its current round

    def value(self, name: str) -> object:
        return self.settings[name].value

    @property
    def readiness_timeout(self) -> float:
        value = self.settings["timeout"].value
        assert isinstance(value, float)
        return value

    def run_seed_for(self, nodeid: str) -> int:
        """The run seed a test runs under: the run's, or its stress round's."""
        return stress_run_seed(self.run_seed, self.stress_rounds.get(nodeid, 0))

    def seed_for(self, nodeid: str) -> int:
        return seed_for_test(self.run_seed_for(nodeid), nodeid)

    def replay(self, nodeid: str) -> str:
        """The command that replays the test as it ran (its stress round's seed included)."""
        return replay_command(self.run_seed_for(nodeid), nodeid)


SESSION_KEY = pytest.StashKey[GuardSession]()


def build_session(config: pytest.Config, target: str, target_reason: str) -> GuardSession:
    settings = {
        option.name: resolve(config, option.name, target)
        for option in OPTIONS
        if option.name != "target"
    }
    worker_input = getattr(config, "workerinput", None)
    seed_setting = settings["seed"]
    if seed_setting.value is not None:
        run_seed, seed_source = int(seed_setting.value), seed_setting.source
    elif worker_input is not None and "startup_guard_seed" in worker_input:
        run_seed, seed_source = int(worker_input["startup_guard_seed"]), "xdist controller"
    else:
        run_seed, seed_source = draw_run_seed(), "drawn at random"
    return GuardSession(target, target_reason, settings, run_seed, seed_source)


def get_session(config: pytest.Config) -> GuardSession:
    return config.stash[SESSION_KEY]
