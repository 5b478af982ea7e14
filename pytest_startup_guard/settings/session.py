"""What the plugin knows for a whole run: resolved settings, the run seed, the target."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import pytest

from pytest_startup_guard.settings.options import (
    OPTIONS,
    Setting,
    check_other_targets,
    misspelt_variables,
    resolve,
)
from pytest_startup_guard.settings.paths import check_output_paths
from pytest_startup_guard.settings.per_target import target_settings_summary
from pytest_startup_guard.settings.seeds import (
    draw_run_seed,
    replay_command,
    seed_for_test,
    stress_run_seed,
)

_Value = TypeVar("_Value", int, float, bool, str)


@dataclass
class GuardSession:
    """The run's resolved settings (``settings``: each one's value and source, for the header
    and the report; the typed properties below: what the code reads), its seed and target."""

    target: str
    target_reason: str
    settings: dict[str, Setting]
    run_seed: int
    seed_source: str
    warnings: list[str] = field(default_factory=list)
    stress_rounds: dict[str, int] = field(default_factory=dict)  # nodeid -> its current round

    def _setting(self, name: str, kind: type[_Value]) -> _Value:
        value = self.settings[name].value
        if not isinstance(value, kind):  # options.py's parsers and defaults make it one
            raise TypeError(f"setting {name!r} is {value!r}, not a {kind.__name__}")
        return value

    def _optional(self, name: str, kind: type[_Value]) -> _Value | None:
        return None if self.settings[name].value is None else self._setting(name, kind)

    @property
    def readiness_timeout(self) -> float:
        """``timeout``: a server fleet's readiness time-out, in seconds."""
        return self._setting("timeout", float)

    @property
    def stress(self) -> int:
        """``stress``: the rounds each start-up test runs (1: no stress)."""
        return self._setting("stress", int)

    @property
    def explore_point(self) -> int | None:
        """``explore_point``: the only access point to explore (a replay), or None for all."""
        return self._optional("explore_point", int)

    @property
    def explore_all(self) -> bool:
        """``explore_all``: run every access point, even where the code asks for prune=True."""
        return self._setting("explore_all", bool)

    @property
    def warm(self) -> str:
        """``warm``: ``off``, ``on`` or ``or_cold``, for launches that give no ``warm=``."""
        return self._setting("warm", str)

    @property
    def strict_reruns(self) -> bool:
        """``strict_reruns``: fail the run when a start-up test passed only on a rerun."""
        return self._setting("strict_reruns", bool)

    @property
    def allow_reruns(self) -> bool:
        """``allow_reruns``: pytest-rerunfailures may rerun start-up tests."""
        return self._setting("allow_reruns", bool)

    @property
    def report_path(self) -> str | None:
        """``report``: where the JSON report goes, as given (not resolved)."""
        return self._optional("report", str)

    @property
    def html_path(self) -> str | None:
        """``html``: where the HTML report goes, as given (not resolved)."""
        return self._optional("html", str)

    @property
    def artifacts_dir(self) -> str | None:
        """``artifacts``: where failed tests' artifacts go, as given (not resolved)."""
        return self._optional("artifacts", str)

    def header_lines(self, config: pytest.Config) -> list[str]:
        """pytest's header: the target, the run seed and the time-out, each with where it came
        from, then the settings given per target, if any."""
        timeout = self.settings["timeout"]
        lines = [
            f"startup-guard: target={self.target} ({self.target_reason}),"
            f" seed={self.run_seed} ({self.seed_source}),"
            f" timeout={timeout.value:g}s ({timeout.source})"
        ]
        per_target = target_settings_summary(config, self.target, self.settings)
        if per_target:
            lines.append(per_target)
        return lines

    def replay_section(self, nodeid: str) -> str:
        """What a failed start-up test's report adds: its seeds, and the command that replays
        it."""
        return (
            f"run seed {self.run_seed_for(nodeid)}, test seed {self.seed_for(nodeid)}\n"
            f"replay: {self.replay(nodeid)}"
        )

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
    session = GuardSession(target, target_reason, settings, run_seed, seed_source)
    if worker_input is None:  # once per run: the xdist controller, or the only process
        session.warnings.extend(misspelt_variables())
        check_other_targets(config, target)
        check_output_paths(settings, config.invocation_params.dir)
    return session


def get_session(config: pytest.Config) -> GuardSession:
    return config.stash[SESSION_KEY]
