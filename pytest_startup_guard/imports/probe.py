"""The import-race probe: is it safe to import a module from a background thread?

A module that replaces ``sys.modules[name]`` at the end of its own import (``transformers``
installs a lazy module so) breaks a second thread that imports it while the first import is
still running: that thread waits on the import lock, then receives the stale module object,
which lacks the lazy attributes (transformers 5.24, CPython 3.11). The main thread fails with
``ImportError: cannot import name ...``; a background thread with ``AttributeError``, which
``contextlib.suppress(Exception)`` swallows.

``import_race`` reproduces that in fresh interpreters. It first imports the module alone to
measure its import time (and to check that it imports at all), then sweeps the delay between
the two imports across that time, in both orders:

- ``background first``: a thread starts the import, the main thread imports ``delay`` later;
- ``main first``: the main thread starts the import, a thread imports ``delay`` later.

What each thread runs is what the incident ran: the main thread
``from <module> import <attrs>``; the background thread, inside
``with contextlib.suppress(Exception):``, ``import <module>`` and then reads each attribute.
Without ``attrs`` both threads run ``import <module>`` and a thread fails when the module object
it received is no longer ``sys.modules[<module>]`` (it would fail at its first attribute use).

Standard library only: the module under test is imported by the child interpreters, never here;
what they run is ``programs/measure_import.py`` and ``programs/race_imports.py``.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pytest_startup_guard.checks import (
    environment,
    flag,
    folder,
    seconds,
    texts,
    whole_number,
)
from pytest_startup_guard.checks import path as checked_path
from pytest_startup_guard.errors import InvalidArgumentError
from pytest_startup_guard.imports.runner import (
    TAIL_CHARS,
    Finished,
    Interpreters,
    child_env,
    default_workers,
    last_error_line,
    program_argv,
)
from pytest_startup_guard.imports.table import format_seconds, render, shorten
from pytest_startup_guard.lifetimes import lives_for_its_test
from pytest_startup_guard.wording import printable

BACKGROUND_FIRST = "background first"
MAIN_FIRST = "main first"
ORDERS = (BACKGROUND_FIRST, MAIN_FIRST)

# Where the delays fall, as fractions of the measured import time. A second import that starts
# while the first is running fails every time (transformers: 10 of 10, 20-600 ms after the
# background import started); five points in both orders catch a lazy sys.modules swap in one
# call even when the import time measured alone was inflated by a busy machine (the low
# fractions still land inside the import).
DEFAULT_FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)
MEASUREMENTS = 2  # measurement runs (in parallel); the fastest one sets the sweep

_RESULT_MARKER = "@@startup-guard-import-race@@"
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PATH_SUFFIX = re.compile(r" \((?:/|[A-Za-z]:\\)[^()]*\)$")  # "(/site-packages/x/__init__.py)"


class ImportProbeError(InvalidArgumentError):
    """Bad input to the probe: a module that does not import, a missing attribute, a bad path.

    An ``InvalidArgumentError`` (so a ``StartupGuardError`` and a ``ValueError``): the shared
    checks raise it for the probe's numbers."""


def resolve_python(python: str | os.PathLike[str], where: str) -> str:
    """The absolute path of the interpreter ``python`` names (a path or a name on PATH)."""
    text = os.fspath(python)
    found = shutil.which(text) if os.sep not in text else text
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise ImportProbeError(
            f"python {text!r} given to {where} is not an executable file;"
            f" expected a Python interpreter such as {sys.executable!r}"
        )
    return os.path.abspath(found)  # the interpreters may run in another cwd


def _parse_marked(completed: Finished) -> dict[str, object] | None:
    """The JSON report a child program printed after the marker; None when it printed none."""
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(_RESULT_MARKER):
            value = json.loads(line[len(_RESULT_MARKER) :])
            return value if isinstance(value, dict) else None
    return None


# -- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportRun:
    """One fresh interpreter of the sweep: the two imports ``delay`` seconds apart."""

    order: str  # "background first" or "main first"
    delay: float  # seconds between the first import starting and the second one starting
    repeat: int
    main_error: str | None  # "ImportError: cannot import name ..." in the main thread
    background_error: str | None  # the background thread's exception
    swallowed: bool  # the background exception was swallowed by suppress(Exception)
    overlapped: bool  # the second import started while the first was still running
    returncode: int | None  # None: killed on time-out
    seconds: float
    output_tail: str = ""

    @property
    def crashed(self) -> bool:
        """The interpreter timed out or died before reporting (a deadlock, a crash)."""
        return self.returncode is None or (
            self.returncode != 0 and not (self.main_error or self.background_error)
        )

    @property
    def failed(self) -> bool:
        return bool(self.main_error or self.background_error or self.crashed)

    @property
    def failed_thread(self) -> str | None:
        """``"main"``, ``"background"``, ``"both"``, ``"process"`` (crash) or None."""
        if self.main_error and self.background_error:
            return "both"
        if self.main_error:
            return "main"
        if self.background_error:
            return "background"
        if self.crashed:
            return "process"
        return None

    @property
    def exception(self) -> str | None:
        if self.main_error or self.background_error:
            return self.main_error or self.background_error
        if self.returncode is None:
            return "timed out (killed): a deadlock between the two imports?"
        if self.crashed:
            return f"exit code {self.returncode}: {last_error_line(self.output_tail)}"
        return None


@dataclass
class ImportRaceResult:
    """What ``import_race`` saw: the measurement, and every run of the sweep (``.runs``)."""

    module: str
    attrs: tuple[str, ...]
    python: str
    import_seconds: float  # measured alone, in a fresh interpreter (the fastest measurement)
    preloaded: bool  # already in sys.modules at interpreter start: nothing to race
    suppress: bool
    runs: list[ImportRun] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the whole probe

    @property
    def failures(self) -> list[ImportRun]:
        return [run for run in self.runs if run.failed]

    @property
    def raced(self) -> list[ImportRun]:
        """The runs whose two imports really overlapped."""
        return [run for run in self.runs if run.overlapped]

    @property
    def safe(self) -> bool:
        return not self.failures

    def describe(self) -> str:
        call = f"import_race({self.module!r}" + (f", attrs={self.attrs!r})" if self.attrs else ")")
        verdict = (
            f"{len(self.failures)} of {len(self.runs)} runs failed"
            if self.runs
            else "no runs: the module is imported at interpreter start, nothing to race"
        )
        lines = [
            f"{call}: {verdict}",
            f"import time {format_seconds(self.import_seconds)} alone in a fresh interpreter"
            f" ({self.python}); {len(self.raced)} of {len(self.runs)} runs overlapped the imports;"
            f" probe took {self.seconds:.1f} s",
            "main thread: "
            + (
                f"from {self.module} import {', '.join(self.attrs)}"
                if self.attrs
                else f"import {self.module}"
            )
            + "; background thread: "
            + ("with suppress(Exception): " if self.suppress else "")
            + f"import {self.module}"
            + "".join(f"; {self.module}.{attr}" for attr in self.attrs),
        ]
        return "\n".join(lines)

    def table(self) -> str:
        header = ("#", "order", "delay", "overlap", "failed", "swallowed", "exception")
        rows = [header]
        for number, run in enumerate(self.runs, 1):
            rows.append(
                (
                    str(number),
                    run.order,
                    format_seconds(run.delay),
                    "yes" if run.overlapped else "no",
                    run.failed_thread or "-",
                    "yes" if run.swallowed else "-",
                    shorten(_PATH_SUFFIX.sub("", run.exception or "-"), 110),
                )
            )
        return render(rows)

    def __str__(self) -> str:
        return self.describe() + ("\n" + self.table() if self.runs else "")

    def assert_safe(self, *, allow_unraced: bool = False) -> None:
        """Fail, with every run in the message, unless no run failed.

        A sweep in which no run overlapped the two imports proves nothing; it fails too unless
        ``allow_unraced=True`` (a module that imports in microseconds is hard to race).
        """
        __tracebackhide__ = True
        if self.failures:
            raise AssertionError(
                f"importing {self.module!r} from a background thread is not safe\n{self}"
            )
        if self.runs and not self.raced and not allow_unraced:
            raise AssertionError(
                f"inconclusive: no run imported {self.module!r} while the other import was"
                " running; pass larger delays=(...), or allow_unraced=True to accept it\n"
                f"{self}"
            )

    def assert_unsafe(self) -> None:
        """Fail unless some run failed: proves that the probe catches a known-bad module."""
        __tracebackhide__ = True
        if not self.failures:
            raise AssertionError(
                f"expected the import race on {self.module!r} to fail at least once\n{self}"
            )


# -- the probe ---------------------------------------------------------------------------------


def _validate(module: str, attrs: str | Iterable[str]) -> tuple[str, tuple[str, ...]]:
    """The module name and the attribute names, once both are valid names."""
    if not isinstance(module, str) or not _DOTTED_NAME.match(module):
        raise ImportProbeError(
            f"invalid module {module!r} given to import_race:"
            " expected a dotted module name such as 'transformers' or 'package.module'"
        )
    names = (attrs,) if isinstance(attrs, str) else tuple(attrs)
    for name in names:
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise ImportProbeError(
                f"invalid attribute {name!r} in attrs= of import_race({module!r}):"
                " expected names such as 'AutoConfig'"
            )
    return module, names


@dataclass(frozen=True)
class _Programs:
    """The fresh interpreters of one ``import_race`` call, each running one of ``programs/``."""

    interpreters: Interpreters
    python: str

    def run(self, program: str, params: Mapping[str, object], timeout: float) -> Finished:
        """``python -c <programs/PROGRAM.py> PARAMS`` read to its end, or killed after
        ``timeout`` with everything it started."""
        argv = program_argv(self.python, program, json.dumps(params))
        return self.interpreters.run(argv, timeout, read_to_end=True)


@dataclass(frozen=True)
class _Measurement:
    """The module imported alone: its fastest import time, and whether it was preloaded."""

    seconds: float
    preloaded: bool


def _measure(
    programs: _Programs, module: str, attrs: tuple[str, ...], timeout: float
) -> _Measurement:
    """Import the module alone, ``MEASUREMENTS`` times at once; the fastest import time.

    Raises ``ImportProbeError`` when it does not import, times out, or lacks one of ``attrs``.
    """
    params = {"module": module, "attrs": list(attrs), "marker": _RESULT_MARKER}
    with ThreadPoolExecutor(MEASUREMENTS) as pool:
        completions = list(
            pool.map(lambda _: programs.run("measure_import", params, timeout), range(MEASUREMENTS))
        )
    cwd = os.fspath(programs.interpreters.cwd or os.getcwd())
    reports = []
    for completed in completions:
        report = _parse_marked(completed)
        where = f"(measurement run: {programs.python} -c ..., cwd {cwd})"
        if completed.timed_out:
            raise ImportProbeError(
                f"module {module!r} did not import within {timeout:g} s alone {where};"
                f" raise timeout= if that is expected\n{completed.tail()}"
            )
        if report is None:
            raise ImportProbeError(
                f"module {module!r} does not import alone in a fresh interpreter {where}:"
                f" {last_error_line(completed.stderr)}; make it importable there"
                f" (pythonpath=[...], cwd=..., python=...)\n--- stderr tail ---\n"
                f"{printable(completed.stderr.strip()[-TAIL_CHARS:])}"
            )
        missing = report.get("missing")
        if isinstance(missing, list) and missing:
            details = printable("; ".join(f"{name!r}: {error}" for name, error in missing))
            raise ImportProbeError(
                f"attrs= of import_race({module!r}) names what the module lacks even when"
                f" imported alone {where}: {details}"
            )
        reports.append(report)
    return _Measurement(
        seconds=min(float(str(report["seconds"])) for report in reports),
        preloaded=any(bool(report["preloaded"]) for report in reports),
    )


def _spans_overlap(spans: object) -> bool:
    """Whether the two threads' import spans, as the race script reported them, overlap."""
    if not isinstance(spans, dict) or set(spans) != {"main", "background"}:
        return False
    (main_start, main_end), (background_start, background_end) = (
        spans["main"],
        spans["background"],
    )
    return bool(max(main_start, background_start) < min(main_end, background_end))


def _race_once(
    programs: _Programs, params: dict[str, object], timeout: float, repeat: int
) -> ImportRun:
    """Run the race program once with ``params`` and read what each thread saw."""
    completed = programs.run("race_imports", params, timeout)
    report = _parse_marked(completed) or {}
    errors = report.get("errors")
    errors = errors if isinstance(errors, dict) else {}
    # What the child says of its exceptions is quoted in messages: shown printable.
    errors = {thread: printable(str(error)) for thread, error in errors.items() if error}
    background_error = errors.get("background")
    return ImportRun(
        order=str(params["order"]),
        delay=float(str(params["delay"])),
        repeat=repeat,
        main_error=errors.get("main"),
        background_error=background_error,
        # A background thread still importing at the end was never caught by anything.
        swallowed=bool(
            background_error
            and params["suppress"]
            and not background_error.startswith("TimeoutError")
        ),
        overlapped=_spans_overlap(report.get("spans")),
        returncode=completed.returncode,
        seconds=completed.seconds,
        output_tail=completed.tail(),
    )


def sweep_delays(
    import_seconds: float, fractions: Iterable[float] = DEFAULT_FRACTIONS
) -> list[float]:
    """The delays of the sweep: fractions of the measured import time, in seconds."""
    return [round(import_seconds * fraction, 4) for fraction in fractions]


def import_race(
    module: str,
    attrs: str | Iterable[str] = (),
    python: str | os.PathLike[str] = sys.executable,
    *,
    delays: Iterable[float] | None = None,
    fractions: Iterable[float] = DEFAULT_FRACTIONS,
    orders: Iterable[str] = ORDERS,
    repeats: int = 1,
    suppress: bool = True,
    workers: int | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    pythonpath: Iterable[str | os.PathLike[str]] = (),
    cwd: str | os.PathLike[str] | None = None,
) -> ImportRaceResult:
    """Race an import of ``module`` in a background thread against one in the main thread.

    Runs fresh interpreters of ``python``: first the module alone (its import time; a module
    that does not import, or lacks one of ``attrs``, raises ``ImportProbeError``), then one
    interpreter per order, delay and repeat, ``workers`` at a time (default: 2, at most the
    cores). ``delays`` (seconds) replaces the default sweep, ``fractions`` of the measured
    import time. ``suppress=False`` leaves the background import unwrapped. ``timeout`` is per
    interpreter (default 30 s plus ten import times); one that passes it is killed with every
    process it started and counts as failed. ``env``, ``pythonpath`` and ``cwd`` shape the
    interpreters; the child runtime's plan is never passed on.
    """
    started = time.perf_counter()
    _check_options(
        attrs=attrs,
        delays=delays,
        fractions=fractions,
        suppress=suppress,
        workers=workers,
        timeout=timeout,
        env=env,
        pythonpath=pythonpath,
        cwd=cwd,
    )
    module, names = _validate(module, attrs)
    executable = resolve_python(python, "import_race")
    order_list = _validate_sweep(orders, repeats)
    programs = _Programs(Interpreters(child_env(env, pythonpath), cwd), executable)
    try:
        measurement = _measure(programs, module, names, timeout or 120.0)
        result = ImportRaceResult(
            module, names, executable, measurement.seconds, measurement.preloaded, suppress
        )
        # A module already imported at interpreter start has no import left to race.
        if not measurement.preloaded:
            delay_list = _delays_to_sweep(delays, fractions, measurement.seconds)
            run_timeout = timeout or _default_run_timeout(measurement.seconds, delay_list)
            sweep = _Sweep(programs, module, names, suppress, run_timeout)
            result.runs = _race_all(sweep, _plan_runs(order_list, delay_list, repeats), workers)
        result.seconds = time.perf_counter() - started
        return result
    finally:
        programs.interpreters.close()


def _validate_sweep(orders: Iterable[str], repeats: int) -> list[str]:
    """Check ``orders`` and ``repeats`` before anything runs; the orders as a list."""
    order_list = list(orders)
    for order in order_list:
        if order not in ORDERS:
            raise ImportProbeError(
                f"unknown order {order!r} given to import_race; known orders:"
                f" {', '.join(map(repr, ORDERS))}"
            )
    whole_number("repeats", repeats, "import_race()", minimum=1, error=ImportProbeError)
    return order_list


def _check_options(
    *,
    attrs: object,
    delays: object,
    fractions: object,
    suppress: object,
    workers: object,
    timeout: object,
    env: object,
    pythonpath: object,
    cwd: object,
) -> None:
    """``import_race``'s options, checked before any interpreter starts: a module imported
    at interpreter start skips the sweep, and must not let a bad delay through unnoticed."""
    where = "import_race()"
    try:
        if not isinstance(attrs, str):
            texts("attrs", attrs, where, meaning="attribute names")
        if delays is not None:
            for position, delay in enumerate(_numbers("delays", delays, where)):
                seconds(f"delays[{position}]", delay, where)
        for position, fraction in enumerate(_numbers("fractions", fractions, where)):
            seconds(f"fractions[{position}]", fraction, where)
        flag("suppress", suppress, where)
        if workers is not None:
            whole_number("workers", workers, where, minimum=1)
        if timeout is not None:
            seconds("timeout", timeout, where, positive=True)
        if env is not None:
            environment("env", env, where)
        _folders(pythonpath, where)
        if cwd is not None:
            folder("cwd", cwd, where)
    except InvalidArgumentError as error:
        raise ImportProbeError(str(error)) from None


def _numbers(name: str, value: object, where: str) -> list[object]:
    """``value`` as a non-empty list (of numbers, checked by the caller)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgumentError(
            f"invalid {name}={value!r} for {where}: expected a list of numbers of seconds"
        )
    items = list(value)
    if not items:
        raise InvalidArgumentError(
            f"invalid {name}=[] for {where}: expected one or more numbers of seconds"
        )
    return items


def _folders(value: object, where: str) -> list[str]:
    """``pythonpath=``: one folder (str or path) or a list of them."""
    if isinstance(value, (str, os.PathLike)):
        return [checked_path("pythonpath", value, where)]
    if not isinstance(value, Iterable) or isinstance(value, bytes):
        raise InvalidArgumentError(
            f"invalid pythonpath={value!r} for {where}: expected a list of folders"
        )
    return [checked_path(f"pythonpath[{n}]", item, where) for n, item in enumerate(value)]


def _delays_to_sweep(
    delays: Iterable[float] | None, fractions: Iterable[float], import_seconds: float
) -> list[float]:
    """The delays given, else the default sweep over ``import_seconds``; checked."""
    delay_list = (
        [float(delay) for delay in delays]
        if delays is not None
        else sweep_delays(import_seconds, fractions)
    )
    if not delay_list:
        raise ImportProbeError(
            "invalid delays=[] for import_race(): expected one or more delays, in seconds"
        )
    for position, delay in enumerate(delay_list):
        seconds(f"delays[{position}]", delay, "import_race()", error=ImportProbeError)
    return delay_list


def _default_run_timeout(import_seconds: float, delays: Sequence[float]) -> float:
    """Seconds one race interpreter may take when ``timeout=`` is not given.

    Generous on purpose: an interpreter that passes it is killed and counts as failed, so a
    busy machine must not push an honest run past it; the second import starts up to
    ``max(delays)`` late on top of that.
    """
    return 30.0 + 10 * import_seconds + max(delays)


# One race interpreter: (order, delay in seconds, repeat).
_PlannedRun = tuple[str, float, int]


def _plan_runs(orders: Sequence[str], delays: Sequence[float], repeats: int) -> list[_PlannedRun]:
    """Every order at every delay, ``repeats`` times."""
    return [
        (order, delay, repeat)
        for repeat, delay, order in itertools.product(range(repeats), delays, orders)
    ]


@dataclass(frozen=True)
class _Sweep:
    """What every race interpreter of one ``import_race`` call shares."""

    programs: _Programs
    module: str
    attrs: tuple[str, ...]
    suppress: bool
    timeout: float  # per interpreter; also how long the main thread waits for the background

    def run(self, planned: _PlannedRun) -> ImportRun:
        """Race the two imports once, in a fresh interpreter."""
        order, delay, repeat = planned
        params: dict[str, object] = {
            "module": self.module,
            "attrs": list(self.attrs),
            "order": order,
            "delay": delay,
            "suppress": self.suppress,
            "join_timeout": self.timeout,
            "marker": _RESULT_MARKER,
        }
        return _race_once(self.programs, params, self.timeout, repeat)


def _race_all(sweep: _Sweep, plan: Sequence[_PlannedRun], workers: int | None) -> list[ImportRun]:
    """Run ``plan``, ``workers`` interpreters at a time; the runs by order, delay and repeat."""
    with ThreadPoolExecutor(max(1, workers or default_workers())) as pool:
        runs = list(pool.map(sweep.run, plan))
    return sorted(runs, key=lambda run: (ORDERS.index(run.order), run.delay, run.repeat))


@lives_for_its_test
class ImportRaceProbe:
    """The ``import_race`` fixture: ``import_race`` with the test file's folder importable.

    pytest puts a test file's folder (its rootdir-based path) on ``sys.path``; the fresh
    interpreters get the test file's folder on ``PYTHONPATH`` so that a package next to the
    test imports there too. Every result is kept in ``.results``.
    """

    def __init__(self, pythonpath: Iterable[str | os.PathLike[str]] = ()) -> None:
        self.pythonpath = [os.fspath(path) for path in pythonpath]
        self.results: list[ImportRaceResult] = []

    def __call__(self, module: str, *args: Any, **options: Any) -> ImportRaceResult:
        """``import_race(module, ...)`` with the test file's folder last on ``pythonpath=``;
        the arguments are ``import_race``'s."""
        try:
            given = _folders(options.get("pythonpath", ()), "import_race()")
        except InvalidArgumentError as error:
            raise ImportProbeError(str(error)) from None
        options["pythonpath"] = [*given, *self.pythonpath]
        result = import_race(module, *args, **options)
        self.results.append(result)
        return result
