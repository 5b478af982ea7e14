"""Start-method and environment-choice checks of a start-up, each in fresh interpreters.

The incident (docs/imports.md): ``multiprocessing.set_start_method(...)`` called where a start
method may already be set (``RuntimeError: context has already been set``), and an environment variable
whose documented values (``spawn``, ``fork``) no longer matched the code that read it (which
still handled ``forkserver``).

A *start-up* is what a test wants started: an argv list (``[sys.executable, "-m", "myserver"]``),
``"package.module:function"``, or an importable function object; the function forms run as
``python -c "from package.module import function; function()"``.

``check_start_methods`` runs it once per mode:

- ``spawn``, ``fork``, ``forkserver``: the platform's *default* start method is that one, and
  nothing is set yet (as on macOS, where the default is ``spawn``, or on CPython 3.14 Linux,
  ``forkserver``): code that relies on one method without choosing it fails here;
- ``already_set``: ``multiprocessing.set_start_method(<already_set>)`` has run before the
  start-up's own code (a launcher, a library, a test runner did it): an unguarded
  ``set_start_method`` fails with ``RuntimeError: context has already been set``.

``check_env_choices`` runs it once per allowed value of a variable (each must succeed), once per
unlisted value (each must fail, in time, with an error that names the variable, or the value
together with an accepted one) and, by default, once with the variable unset (must succeed).

How the mode reaches the start-up: a ``sitecustomize.py`` (a copy of ``programs/start_mode.py``)
in a private folder put first on ``PYTHONPATH`` applies it at interpreter start, before any of
the start-up's code, and chains to the ``sitecustomize`` it shadows. The mode is taken out of
the environment as it is applied, so the start-up's own children start plainly. It also records
the start method of every process the start-up starts (``started with`` in the table). A
start-up that ignores ``PYTHONPATH`` (``python -E`` or ``-I``) is reported, not silently run
without its mode. Standard library only.

Nothing a start-up started outlives its check: each runs in a session of its own, ended with
its group, and every process of one check carries the check's marker (``STARTUP_GUARD_RUN``),
by which what detached itself is ended when the check is done, and by the run's reaper should
pytest die. The private folder is a plan folder (``sg-start-*``), which the reaper removes then.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_startup_guard.checks import (
    environment,
    flag,
    folder,
    pattern,
    seconds,
    texts,
    whole_number,
)
from pytest_startup_guard.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    StartupGuardError,
    UnknownNameError,
)
from pytest_startup_guard.imports.probe import resolve_python
from pytest_startup_guard.imports.runner import (
    PROGRAMS,
    TAIL_CHARS,
    Interpreters,
    child_env,
    default_workers,
    last_error_line,
)
from pytest_startup_guard.imports.startup_runs import (
    EnvChoiceResult,
    StartMethodResult,
    StartupRun,
)
from pytest_startup_guard.lifetimes import lives_for_its_test
from pytest_startup_guard.runtime.plan_folder import make_plan_folder
from pytest_startup_guard.runtime.run_marker import current_keeper
from pytest_startup_guard.wording import printable

START_METHODS = ("spawn", "fork", "forkserver")
ALREADY_SET = "already_set"
MODES = (*START_METHODS, ALREADY_SET)
DEFAULT_TIMEOUT = 60.0
STOP_GRACE = 5.0  # seconds a start-up stopped once ready has between SIGTERM and SIGKILL
UNLISTED_VALUE = "startup-guard-unlisted-value"

# Read by programs/start_mode.py, the sitecustomize that applies the mode: the same names.
_MODE_ENV = "STARTUP_GUARD_START_MODE"
_RECORD_ENV = "STARTUP_GUARD_START_RECORD"
_CALLABLE_SPEC = re.compile(
    r"([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*):([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\Z"
)

Startup = str | Sequence[str] | Callable[[], object]


class StartupSpecError(StartupGuardError, ValueError):
    """A start-up, variable or value list the checks cannot use."""


# -- start-ups ---------------------------------------------------------------------------------


def startup_argv(startup: Startup, python: str, where: str) -> list[str]:
    """The argv of a start-up given as argv, ``"module:function"`` or a function object."""
    if isinstance(startup, str):
        match = _CALLABLE_SPEC.match(startup)
        if not match:
            raise StartupSpecError(
                f"start-up {startup!r} given to {where} is not 'package.module:function';"
                " pass a command as a list (['python', '-m', 'myserver']) or an importable"
                " function"
            )
        return _call_argv(python, match.group(1), match.group(2))
    if callable(startup):
        module = getattr(startup, "__module__", None)
        qualname = getattr(startup, "__qualname__", "")
        if not module or module == "__main__" or "<" in qualname:
            raise StartupSpecError(
                f"start-up {startup!r} given to {where} cannot be imported by a fresh"
                f" interpreter (module {module!r}, name {qualname!r}); define it at the top"
                " level of an importable module, or pass 'package.module:function'"
            )
        return _call_argv(python, module, qualname)
    argv = list(startup)
    if not argv or not all(isinstance(part, str) for part in argv):
        raise StartupSpecError(
            f"start-up {startup!r} given to {where}: expected a non-empty list of strings"
        )
    return argv


def _call_argv(python: str, module: str, qualname: str) -> list[str]:
    """``python -c`` that imports ``module``'s top-level name and calls ``qualname``."""
    first, *rest = qualname.split(".")
    call = ".".join([first, *rest])
    return [python, "-c", f"from {module} import {first}\n{call}()"]


def describe_startup(startup: Startup) -> str:
    """The start-up as the results name it."""
    if isinstance(startup, str):
        return startup
    if callable(startup):
        return f"{getattr(startup, '__module__', '?')}:{getattr(startup, '__qualname__', '?')}"
    return " ".join(startup)


# -- running one start-up ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    """How one start-up ended, and the record its sitecustomize wrote."""

    returncode: int | None
    output: str
    seconds: float
    ready: bool
    timed_out: bool
    record: dict[str, object]


def _run_startup(
    interpreters: Interpreters,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float,
    ready: re.Pattern[str] | None,
    mode: str,
    record_path: Path,
) -> _Outcome:
    """Run ``argv`` in ``mode`` until it exits, becomes ``ready`` or times out; then stop it
    (SIGTERM, SIGKILL after ``STOP_GRACE`` seconds, and whatever it left in its group)."""
    environment = {**env, _MODE_ENV: mode, _RECORD_ENV: str(record_path)}
    finished = interpreters.run(argv, timeout, env=environment, ready=ready, merge_output=True)
    record: dict[str, object] = {}
    try:
        loaded = json.loads(record_path.read_text())
        record = loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        pass
    return _Outcome(
        returncode=finished.returncode,
        output=finished.stdout,
        seconds=finished.seconds,
        ready=finished.ready,
        timed_out=finished.timed_out,
        record=record,
    )


def _sitecustomize_dir(workdir: Path) -> Path:
    """A folder holding the sitecustomize that applies the mode, to put first on PYTHONPATH."""
    folder = workdir / "site"
    folder.mkdir()
    shutil.copyfile(PROGRAMS / "start_mode.py", folder / "sitecustomize.py")
    return folder


# -- the checks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Planned:
    """One run a check plans: its label, what it should do, and how it is set up."""

    label: str
    expected: str  # "start" | "fail clearly"
    mode: str  # "default:<method>", "set:<method>" or "record:" (only record the start method)
    env: Mapping[str, str] = field(default_factory=dict)
    remove: tuple[str, ...] = ()  # variables taken out of the start-up's environment
    value: str | None = None  # the variable's value (env-choice runs)
    skipped: str | None = None


def _execute(
    plan: Sequence[_Planned],
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    pythonpath: Iterable[str | os.PathLike[str]],
    cwd: str | os.PathLike[str] | None,
    timeout: float,
    ready: str | None,
    workers: int | None,
    judge: Callable[[_Planned, _Outcome], str | None],
) -> list[StartupRun]:
    """Run every planned start-up, ``workers`` at a time; ``judge`` says what went wrong."""
    pattern = re.compile(ready) if ready else None
    with _private_folder() as workdir:
        site = _sitecustomize_dir(workdir)
        # One tree marker for the check: what a start-up left outside its group (a daemon) is
        # ended on close(), SIGTERM then SIGKILL after STOP_GRACE seconds.
        interpreters = Interpreters(child_env(env, [site, *pythonpath]), cwd, STOP_GRACE)
        try:
            runs = _StartupRuns(interpreters, argv, workdir, timeout, pattern, judge)
            with ThreadPoolExecutor(max(1, workers or default_workers())) as pool:
                return list(pool.map(runs.run, enumerate(plan)))
        finally:
            interpreters.close()


@contextmanager
def _private_folder() -> Iterator[Path]:
    """A plan folder (``sg-start-*``) for the block: removed after it, and by the run's reaper
    should pytest die."""
    keeper = current_keeper()
    workdir = make_plan_folder("sg-start-")
    if keeper is not None:
        keeper.add_folder(workdir)
    try:
        yield workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if keeper is not None:
            keeper.remove_folder(workdir)


@dataclass(frozen=True)
class _StartupRuns:
    """What every run of one check shares; ``run`` runs one planned start-up and judges it."""

    interpreters: Interpreters
    argv: Sequence[str]
    workdir: Path  # holds each run's record of its mode and start methods
    timeout: float
    ready: re.Pattern[str] | None
    judge: Callable[[_Planned, _Outcome], str | None]

    def run(self, item: tuple[int, _Planned]) -> StartupRun:
        index, planned = item
        if planned.skipped:
            return StartupRun(
                planned.label, planned.expected, True, None, None, False, 0.0, "", (),
                skipped=planned.skipped,
            )  # fmt: skip
        environment = {**self.interpreters.env, **planned.env}
        for key in planned.remove:
            environment.pop(key, None)
        outcome = _run_startup(
            self.interpreters,
            self.argv,
            env=environment,
            timeout=self.timeout,
            ready=self.ready,
            mode=planned.mode,
            record_path=self.workdir / f"record-{index}.json",
        )
        problem = _launch_problem(planned, outcome, self.timeout) or self.judge(planned, outcome)
        used = outcome.record.get("used")
        return StartupRun(
            label=planned.label,
            expected=planned.expected,
            passed=problem is None,
            problem=problem,
            returncode=outcome.returncode,
            ready=outcome.ready,
            seconds=outcome.seconds,
            error=last_error_line(outcome.output) if outcome.returncode else "",
            started_with=tuple(map(str, used)) if isinstance(used, list) else (),
            output_tail=printable(outcome.output.strip()[-TAIL_CHARS:]),
        )


def _launch_problem(planned: _Planned, outcome: _Outcome, timeout: float) -> str | None:
    """What spoils a run whatever it was checking: a hang, or a mode never applied."""
    if outcome.timed_out:
        return f"did not finish within {timeout:g} s (killed); hanging is failing"
    if outcome.record.get("mode") != planned.mode:
        return (
            "the start-up's interpreter never applied the mode (started with python -E or -I,"
            " or PYTHONPATH replaced?): nothing was checked"
        )
    return None


def _started(outcome: _Outcome) -> bool:
    """A start-up started when it became ready or exited 0."""
    return outcome.ready or outcome.returncode == 0


def check_start_methods(
    startup: Startup,
    *,
    methods: Iterable[str] = MODES,
    already_set: str = "spawn",
    python: str | os.PathLike[str] = sys.executable,
    env: Mapping[str, str] | None = None,
    pythonpath: Iterable[str | os.PathLike[str]] = (),
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    ready: str | None = None,
    workers: int | None = None,
) -> StartMethodResult:
    """Run ``startup`` under each start method as the default, and with one already set.

    Each mode passes when the start-up exits 0 or, with ``ready`` (a regular expression), when
    its output matches it (the start-up is then stopped: SIGTERM, SIGKILL after 5 s). A start-up
    that neither finishes nor becomes ready within ``timeout`` seconds fails. Start methods this
    platform lacks are skipped and say so.
    """
    import multiprocessing

    where = "check_start_methods"
    _check_options(where, startup, env, pythonpath, cwd, timeout, ready, workers)
    try:
        mode_list = texts("methods", methods, f"{where}()", meaning="start methods", empty=False)
    except InvalidArgumentError as error:
        raise StartupSpecError(str(error)) from None
    for mode in mode_list:
        if mode not in MODES:
            raise UnknownNameError("start method", mode, MODES, where=f"methods= of {where}")
    if already_set not in START_METHODS:
        raise UnknownNameError(
            "start method", already_set, START_METHODS, f"already_set= of {where}"
        )
    argv = startup_argv(startup, resolve_python(python, where), where)
    available = set(multiprocessing.get_all_start_methods())
    plan = []
    for mode in mode_list:
        method = already_set if mode == ALREADY_SET else mode
        label = f"already set ({method})" if mode == ALREADY_SET else f"default {method}"
        missing = None if method in available else f"{method!r} is not available on this platform"
        kind = "set" if mode == ALREADY_SET else "default"
        plan.append(_Planned(label, "start", f"{kind}:{method}", skipped=missing))

    def judge(planned: _Planned, outcome: _Outcome) -> str | None:
        if _started(outcome):
            return None
        return f"exit code {outcome.returncode}: {last_error_line(outcome.output)}"

    runs = _execute(
        plan, argv, env=env, pythonpath=pythonpath, cwd=cwd, timeout=timeout, ready=ready,
        workers=workers, judge=judge,
    )  # fmt: skip
    return StartMethodResult(describe_startup(startup), runs)


def check_env_choices(
    startup: Startup,
    variable: str,
    allowed: Iterable[str],
    *,
    unlisted: Iterable[str] = (UNLISTED_VALUE,),
    unset: bool = True,
    match: str | None = None,
    python: str | os.PathLike[str] = sys.executable,
    env: Mapping[str, str] | None = None,
    pythonpath: Iterable[str | os.PathLike[str]] = (),
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    ready: str | None = None,
    workers: int | None = None,
) -> EnvChoiceResult:
    """Check that ``variable``'s documented ``allowed`` values and the code that reads it agree.

    Runs ``startup`` once per allowed value (each must start: exit 0 or match ``ready``; when
    the value is a start method and the start-up left one set, it must be that one), once per
    ``unlisted`` value (each must fail in time with a clear error: the last error line names
    ``variable``, or the value together with an allowed one; or matches ``match``), and with
    the variable unset (must start) unless ``unset=False``.
    """
    where = "check_env_choices"
    _check_options(where, startup, env, pythonpath, cwd, timeout, ready, workers)
    try:
        flag("unset", unset, f"{where}()")
        if match is not None:
            pattern("match", match, f"{where}()")
        for name, values in (("allowed", allowed), ("unlisted", unlisted)):
            # a str too is refused: one value would be taken for its letters' list
            texts(name, values, f"{where}()", meaning="values of the variable")
    except InvalidArgumentError as error:
        raise StartupSpecError(str(error)) from None
    allowed_values, unlisted_values = _validate_env_choices(variable, allowed, unlisted, where)
    argv = startup_argv(startup, resolve_python(python, where), where)
    judge = _EnvChoiceJudge(variable, allowed_values, match)
    plan = _plan_env_choices(variable, allowed_values, unlisted_values, unset=unset)
    runs = _execute(
        plan, argv, env=env, pythonpath=pythonpath, cwd=cwd, timeout=timeout, ready=ready,
        workers=workers, judge=judge,
    )  # fmt: skip
    return EnvChoiceResult(
        describe_startup(startup), variable, allowed_values, unlisted_values, runs
    )


def _check_options(
    where: str,
    startup: object,
    env: object,
    pythonpath: object,
    cwd: object,
    timeout: object,
    ready: object,
    workers: object,
) -> None:
    """What both checks share, checked before any interpreter starts (``StartupSpecError``)."""
    called = f"{where}()"
    try:
        if not (isinstance(startup, (str, list, tuple)) or callable(startup)):
            raise ArgumentTypeError(
                f"invalid startup={startup!r} for {called}: expected a command as a list of str,"
                " 'package.module:function' or an importable function"
            )
        if env is not None:
            environment("env", env, called)
        _paths(pythonpath)
        if cwd is not None:
            folder("cwd", cwd, called)
        seconds("timeout", timeout, called, positive=True)
        if ready is not None:
            pattern("ready", ready, called)
        if workers is not None:
            whole_number("workers", workers, called, minimum=1)
    except InvalidArgumentError as error:
        raise StartupSpecError(str(error)) from None


def _validate_env_choices(
    variable: str, allowed: Iterable[str], unlisted: Iterable[str], where: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The allowed and unlisted values, once the variable and both lists make sense."""
    if not isinstance(variable, str) or not re.match(r"[A-Za-z_][A-Za-z0-9_]*\Z", variable):
        raise StartupSpecError(
            f"variable {variable!r} given to {where}: expected an environment variable name"
        )
    allowed_values, unlisted_values = tuple(allowed), tuple(unlisted)
    if not allowed_values:
        raise StartupSpecError(f"allowed= of {where}({variable!r}) is empty: name its values")
    overlap = sorted(set(allowed_values) & set(unlisted_values))
    if overlap:
        raise StartupSpecError(
            f"unlisted= of {where}({variable!r}) repeats allowed values {overlap}:"
            f" a value is either documented ({', '.join(allowed_values)}) or not"
        )
    return allowed_values, unlisted_values


def _plan_env_choices(
    variable: str, allowed: Sequence[str], unlisted: Sequence[str], *, unset: bool
) -> list[_Planned]:
    """One run per allowed value, one per unlisted value, and one unset when asked."""
    plan = [
        _Planned(f"{variable}={value!r}", "start", "record:", {variable: value}, value=value)
        for value in allowed
    ]
    plan += [
        _Planned(f"{variable}={value!r}", "fail clearly", "record:", {variable: value}, value=value)
        for value in unlisted
    ]
    if unset:
        plan.append(_Planned(f"{variable} unset", "start", "record:", remove=(variable,)))
    return plan


class _EnvChoiceJudge:
    """Why an env-choice run disagrees with the documented values; None when it agrees."""

    def __init__(self, variable: str, allowed: tuple[str, ...], match: str | None) -> None:
        self.variable = variable
        self.allowed = allowed
        self.match = match
        self.pattern = re.compile(match) if match else None

    def __call__(self, planned: _Planned, outcome: _Outcome) -> str | None:
        if planned.expected == "start":
            return _documented_value_problem(planned.value, outcome)
        return self._unlisted_value_problem(planned.value, outcome)

    def _unlisted_value_problem(self, value: str | None, outcome: _Outcome) -> str | None:
        """An unlisted value must fail, with an error a user can act on."""
        if outcome.ready:
            return f"unlisted value {value!r} accepted silently: the start-up became ready"
        if outcome.returncode == 0:
            return f"unlisted value {value!r} accepted silently: the start-up exited 0"
        error = last_error_line(outcome.output)
        if self.pattern is not None:
            if self.pattern.search(outcome.output):
                return None
            return f"failed, but its output does not match {self.match!r}: {error}"
        # Clear enough: the error names the variable, or the bad value next to a good one.
        if self.variable in error or (
            value is not None and value in error and any(a in error for a in self.allowed)
        ):
            return None
        return (
            f"unclear error (names neither {self.variable} nor {value!r} with an accepted"
            f" value): {error}"
        )


def _documented_value_problem(value: str | None, outcome: _Outcome) -> str | None:
    """A documented value (or none) must start, with the start method it names if it names one."""
    if not _started(outcome):
        return f"documented value, but exit code {outcome.returncode}: " + last_error_line(
            outcome.output
        )
    used = outcome.record.get("used")
    if value in START_METHODS and isinstance(used, list) and used and value not in used:
        return f"started its processes with {', '.join(used)}, not the {value!r} it was given"
    return None


@lives_for_its_test
class StartMethodChecker:
    """The ``start_methods`` fixture: both checks, with the test file's folder importable."""

    def __init__(self, pythonpath: Iterable[str | os.PathLike[str]] = ()) -> None:
        self.pythonpath = [os.fspath(path) for path in pythonpath]
        self.results: list[StartMethodResult | EnvChoiceResult] = []

    def check(self, startup: Startup, **options: Any) -> StartMethodResult:
        """``check_start_methods(startup, **options)``; see there."""
        options["pythonpath"] = [*_paths(options.get("pythonpath")), *self.pythonpath]
        result = check_start_methods(startup, **options)
        self.results.append(result)
        return result

    def env_choices(
        self, startup: Startup, variable: str, allowed: Iterable[str], **options: Any
    ) -> EnvChoiceResult:
        """``check_env_choices(startup, variable, allowed, **options)``; see there."""
        options["pythonpath"] = [*_paths(options.get("pythonpath")), *self.pythonpath]
        result = check_env_choices(startup, variable, allowed, **options)
        self.results.append(result)
        return result


def _paths(value: object) -> list[str]:
    """The fixture's ``pythonpath=`` option as a list of folders."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if isinstance(value, Iterable) and not isinstance(value, bytes):
        items = list(value)
        if all(isinstance(item, (str, os.PathLike)) for item in items):
            return [os.fspath(item) for item in items]
    raise StartupSpecError(f"invalid pythonpath={value!r}: expected a list of folders")
