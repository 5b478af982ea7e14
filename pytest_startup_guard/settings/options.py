"""Every setting of the plugin, defined once, and the one function that resolves precedence.

Precedence (docs/options.md): command line > environment > per-target ini key
(``startup_guard_X_<target>``) > general ini key (``startup_guard_X``) > default.
A bad value raises ``pytest.UsageError`` naming the value, where it came from, and what is
accepted: ``invalid startup_guard_timeout '-1' in pyproject.toml: expected ...``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_startup_guard.checks import (
    MAX_SECONDS,
    UP_TO_A_DAY,
    parse_pair,
    parse_whole_number,
)
from pytest_startup_guard.targets.detection import TARGETS

TARGET_CHOICES = ("auto", *TARGETS)

_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("0", "false", "no", "off", "")


def one_of(text: str, choices: tuple[str, ...]) -> str:
    """``text`` as one of ``choices`` (any case, spaces around it ignored)."""
    value = text.strip().lower()
    if value not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}")
    return value


def parse_target(text: str) -> str:
    return one_of(text, TARGET_CHOICES)


def parse_seed(text: str) -> int:
    """A run seed: 0 to 2**32-1, in decimal or with a prefix (``0x...``)."""
    return parse_whole_number(text, maximum=2**32 - 1, meaning="a run seed", base=0)


def parse_seconds(text: str) -> float:
    """A time-out: a finite number of seconds > 0, at most a day (``checks.MAX_SECONDS``:
    ``1e300`` would pass ``float`` and then overflow pytest-timeout's ``setitimer``)."""
    accepted = f"expected a positive number of seconds{UP_TO_A_DAY}"
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(accepted) from None
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise ValueError(accepted)
    return value


# The most rounds ``--startup-guard-stress`` runs a test: more never ends in a working day.
MAX_ROUNDS = 10_000


def parse_rounds(text: str) -> int:
    return parse_whole_number(text, minimum=1, maximum=MAX_ROUNDS, meaning="the number of rounds")


def parse_point(text: str) -> int:
    return parse_whole_number(text, minimum=1, meaning="an access point")


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE_WORDS:
        return True
    if value in _FALSE_WORDS:
        return False
    raise ValueError("expected true or false (also 1/0, yes/no, on/off)")


WARM_CHOICES = ("off", "on", "or_cold")


def parse_warm(text: str) -> str:
    """``--startup-guard-warm``: off, on (warm=True where a launch gives no warm=) or or_cold."""
    return one_of(text, WARM_CHOICES)


def parse_path(text: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError("expected a path")
    return value


@dataclass(frozen=True)
class Option:
    """One setting: its flag, ini key(s), environment variable, parser and default."""

    name: str  # "timeout" -> --startup-guard-timeout, startup_guard_timeout, STARTUP_GUARD_TIMEOUT
    help: str
    parse: Callable[[str], Any]
    default: Any
    metavar: str | None = None  # None: a boolean flag
    has_flag: bool = True
    has_env: bool = True
    per_target: bool = True

    @property
    def flag(self) -> str:
        return (
            "--startup-target"
            if self.name == "target"
            else f"--startup-guard-{self.name.replace('_', '-')}"
        )

    @property
    def dest(self) -> str:
        return f"startup_guard_{self.name}"

    @property
    def ini(self) -> str:
        return f"startup_guard_{self.name}"

    @property
    def env(self) -> str:
        return f"STARTUP_GUARD_{self.name.upper()}"

    def target_ini(self, target: str) -> str:
        return f"{self.ini}_{target}"


OPTIONS: tuple[Option, ...] = (
    Option(
        "target",
        "the runner's accelerator: auto (detect), cpu, cuda or rocm; marked tests run only"
        " where the target is among their marks",
        parse_target,
        "auto",
        metavar="{auto,cpu,cuda,rocm}",
        per_target=False,
    ),
    Option(
        "seed",
        "run seed for races and chaos (default: drawn at random and printed)",
        parse_seed,
        None,
        metavar="N",
    ),
    Option(
        "timeout",
        "readiness time-out of a server fleet, in seconds (default 60)",
        parse_seconds,
        60.0,
        metavar="SECONDS",
    ),
    Option(
        "report",
        "write the JSON report of start-up tests to PATH",
        parse_path,
        None,
        metavar="PATH",
    ),
    Option(
        "html",
        "write a self-contained HTML report of start-up tests (totals, verdicts, SVG timelines)"
        " to PATH",
        parse_path,
        None,
        metavar="PATH",
    ),
    Option(
        "artifacts",
        "keep outputs, stacks, timelines and cache listings of failed start-up tests in DIR",
        parse_path,
        None,
        metavar="DIR",
    ),
    Option(
        "stress",
        "run each start-up test N times with N derived seeds; fail it at the first round whose"
        " verdict differs (default 1: no stress)",
        parse_rounds,
        1,
        metavar="N",
        per_target=False,
    ),
    Option(
        "explore_point",
        "explore only access point N in server_fleet.explore() and explore=True cases: the"
        " replay of one failing point",
        parse_point,
        None,
        metavar="N",
        per_target=False,
    ),
    Option(
        "explore_all",
        "run every access point in server_fleet.explore() and explore=True cases even where"
        " the code asks for prune=True (every point is run by default)",
        parse_bool,
        False,
        per_target=False,
    ),
    Option(
        "writer_pair",
        "run only the pair STEP:POINT in server_fleet.explore_writer(): the writer held after"
        " its step STEP, the readers at their point POINT (the replay of one failing pair)",
        parse_pair,
        None,
        metavar="STEP:POINT",
        per_target=False,
    ),
    Option(
        "warm",
        "fork server_fleet members from warm templates where a launch gives no warm=: off,"
        " on (refused where forking is unsafe) or or_cold (start those cold, and say why)",
        parse_warm,
        "off",
        metavar="{off,on,or_cold}",
        per_target=False,
    ),
    Option(
        "strict_reruns",
        "fail the run when a start-up test passed only on a rerun",
        parse_bool,
        False,
    ),
    Option(
        "allow_reruns",
        "let pytest-rerunfailures rerun start-up tests (default false: a rerun hides a race)",
        parse_bool,
        False,
        has_flag=False,
        has_env=False,
    ),
)
OPTIONS_BY_NAME: Mapping[str, Option] = {option.name: option for option in OPTIONS}


@dataclass(frozen=True)
class Setting:
    value: Any
    source: str  # "--startup-guard-timeout", "STARTUP_GUARD_TIMEOUT", "startup_guard_timeout in tox.ini", "default"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("startup-guard", "start-up races (pytest-startup-guard)")
    for option in OPTIONS:
        if option.has_flag:
            takes: dict[str, str] = (
                {"action": "store_true"}  # a boolean flag
                if option.metavar is None
                else {"action": "store", "metavar": option.metavar}
            )
            group.addoption(option.flag, default=None, dest=option.dest, help=option.help, **takes)
        parser.addini(
            option.ini, option.help + (f" (env {option.env})" if option.has_env else ""), default=""
        )
        if option.per_target:
            for target in TARGETS:
                parser.addini(
                    option.target_ini(target),
                    f"startup_guard_{option.name} on {target} runners only",
                    default="",
                )


def _ini_source(config: pytest.Config, key: str) -> str:
    for override in config.option.override_ini or ():
        if override.split("=", 1)[0].strip() == key:
            return f"{key} in -o {override}"
    where = config.inipath.name if config.inipath is not None else "the ini file"
    return f"{key} in {where}"


def _parsed(option: Option, raw: str, source: str) -> Setting:
    try:
        return Setting(option.parse(raw), source)
    except ValueError as error:
        raise pytest.UsageError(f"invalid {name_and_place(source, raw)}: {error}") from None


def name_and_place(source: str, raw: str) -> str:
    """``startup_guard_timeout '-1' in tox.ini`` / ``STARTUP_GUARD_TIMEOUT '-1' (environment)``."""
    name, _, place = source.partition(" in ")
    if place:
        return f"{name} {raw!r} in {place}"
    if name.startswith("STARTUP_GUARD_"):
        return f"{name} {raw!r} (environment variable)"
    return f"{name} {raw!r} (command line)"


def resolve(
    config: pytest.Config,
    name: str,
    target: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Setting:
    """The value of setting ``name`` and where it came from, by the precedence above."""
    option = OPTIONS_BY_NAME[name]
    environ = os.environ if environ is None else environ
    if option.has_flag:
        cli = getattr(config.option, option.dest, None)
        if cli is True and option.metavar is None:
            return Setting(True, option.flag)
        if isinstance(cli, str):
            return _parsed(option, cli, option.flag)
    if option.has_env and environ.get(option.env, "") != "":
        return _parsed(option, environ[option.env], option.env)
    keys = [option.target_ini(target)] if option.per_target and target in TARGETS else []
    keys.append(option.ini)
    for key in keys:
        raw = config.getini(key)
        if isinstance(raw, str) and raw.strip() != "":
            return _parsed(option, raw, _ini_source(config, key))
    return Setting(option.default, "default")


def check_other_targets(config: pytest.Config, target: str) -> None:
    """Parse every per-target ini key of the targets other than ``target`` as its own runner
    would: a bad ``startup_guard_timeout_rocm`` is a usage error on a cpu runner too, not a
    surprise for the first rocm runner."""
    for option in OPTIONS:
        for other in TARGETS if option.per_target else ():
            key = option.target_ini(other)
            raw = config.getini(key)
            if other != target and isinstance(raw, str) and raw.strip() != "":
                _parsed(option, raw, _ini_source(config, key))


ENV_PREFIX = "STARTUP_GUARD_"


def misspelt_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """A warning for each ``STARTUP_GUARD_*`` variable that is no option's but close to one's
    name (``STARTUP_GUARD_TIMOUT``): a typo that would otherwise be ignored without a word.
    Names far from every option's are left alone: the child runtime passes variables of its
    own (``STARTUP_GUARD_PLAN``, ...) to every process of a test, a pytest run among them."""
    import difflib  # only where such a variable is set

    environ = os.environ if environ is None else environ
    known = {option.env: option for option in OPTIONS if option.has_env}
    suffixes = [name[len(ENV_PREFIX) :] for name in known]
    warnings = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in known:
            continue
        close = difflib.get_close_matches(name[len(ENV_PREFIX) :], suffixes, n=1, cutoff=0.75)
        if close:
            meant = known[ENV_PREFIX + close[0]]
            warnings.append(
                f"{name}={environ[name]!r} is not a setting of the plugin and is ignored; did you"
                f" mean {meant.env} ({meant.flag})?"
            )
    return warnings
