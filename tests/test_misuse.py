"""The misuse suite: every case of ``misuse_cases.py`` run as a user runs it, each a test.

A case passes when the run fails with the plugin's own error (an error of
``pytest_startup_guard.errors``, a usage error before the first test, a collection error with
the plugin's message, or ``startup-guard-report: error: ...``), that error contains every word
of the case (at least the argument's name and the bad value), and what the user reads shows no
frame of the plugin's internals and no internal exception. A call that is accepted silently, an
internal ``KeyError``/``TypeError``/``AttributeError``, or a message that names neither the
argument nor its value fails its case.

To stay fast, the ``api``, ``fixture`` and ``marker`` cases run in one pytest of their own
(one test, or one test file, per case), once per worker: a conftest records how each test and
each file ended, and each case reads its own record. ``option``, ``env`` and ``ini`` cases stop
pytest before the first test, one in-process run each; ``cli`` cases call the command's
``main``. ``benchmarks/trust_misuse.py`` runs the same cases through the same functions.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from misuse_cases import CASES, PRELUDE, Misuse
from misuse_cases_report import write_report_files

from pytest_startup_guard.report.cli import main as report_main

# A frame of the plugin's own code in what the user reads (``.../pytest_startup_guard/x.py:12``).
OWN_FRAME = re.compile(r"pytest_startup_guard[/\\][\w/\\]+\.py:\d+")
INTERNAL = ("Traceback (most recent call last)", "INTERNALERROR")
# A collection error that is an exception rather than the plugin's message (``E   KeyError: ...``).
RAISED = re.compile(r"^E\s+[\w.]*(Error|Exception)\b", re.MULTILINE)
OWN_ERROR = "pytest_startup_guard.errors.StartupGuardError"
CALLS_FILE = "test_misuse_calls.py"
RESULTS_FILE = "misuse-results.jsonl"
# The inner run's settings: a readiness time-out a launched case never waits out, and a net.
INNER_ARGS = (
    "-p",
    "startup_guard",
    "-p",
    "no:cacheprovider",
    "-p",
    "timeout",
    "--timeout=300",
    "--startup-guard-timeout=30",
    "--continue-on-collection-errors",
    "-q",
)

RECORDER = f'''
"""Records how each test (setup and call) and each test file of the misuse run ended."""

import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).parent / {RESULTS_FILE!r}


def _write(entry):
    with RESULTS.open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when in ("setup", "call") and (report.failed or report.when == "call"):
        error = call.excinfo.value if call.excinfo is not None else None
        _write(
            {{
                "case": item.originalname.removeprefix("test_"),
                "when": report.when,
                "failed": report.failed,
                "kinds": [f"{{kind.__module__}}.{{kind.__qualname__}}" for kind in type(error).__mro__]
                if error is not None
                else [],
                "message": str(error) if error is not None else "",
                "text": report.longreprtext,
            }}
        )
    return report


def pytest_collectreport(report):
    if report.failed:
        _write({{"file": report.nodeid.split("::")[0], "text": report.longreprtext}})
'''


@dataclass(frozen=True)
class Outcome:
    """How one misuse ended, as the user sees it."""

    failed: bool  # the run, the collection or the call failed
    own: bool  # with the plugin's own error, not an internal exception
    message: str  # the error's words
    shown: str  # everything the user reads about it (frames included)

    def problems(self, case: Misuse) -> list[str]:
        """What keeps this from being a clear error for ``case`` (empty: it is one)."""
        found = []
        if not self.failed:
            found.append("accepted silently: nothing failed")
        elif not self.own:
            found.append("not the plugin's own error (an internal exception?)")
        missing = [word for word in case.words if word not in self.message]
        if self.failed and missing:
            found.append(f"the message does not say {missing}")
        frames = OWN_FRAME.findall(self.shown)
        if frames:
            found.append(f"the user reads frames of the plugin's internals: {frames[:3]}")
        internal = [marker for marker in INTERNAL if marker in self.shown]
        if internal:
            found.append(f"the user reads {internal}")
        return found


NOT_RUN = Outcome(False, False, "", "")


def make_scratch_files(folder: Path) -> None:
    """What the option, env, ini and cli cases point at (misuse_cases.py's docstring)."""
    (folder / "test_plain.py").write_text("def test_plain():\n    pass\n")
    (folder / "a_file.txt").write_text("a file\n")
    (folder / "a_folder").mkdir(exist_ok=True)
    (folder / "empty.json").write_text("{}\n")
    (folder / "bad.json").write_text("not json\n")
    link = folder / "a_link.json"
    if not link.is_symlink():
        link.symlink_to("empty.json")
    write_report_files(folder)  # misuse_cases_report: reports that are not what was written


def grouped_files(cases: list[Misuse]) -> dict[str, str]:
    """The inner run's files: its conftest, one test per call case, one file per marker case."""
    tests = []
    for case in cases:
        if case.where not in ("api", "fixture"):
            continue
        head = f"{case.marker}\n" if case.marker else ""
        if case.before:
            tests.append(case.before)
        tests.append(f"{head}def test_{case.id}({', '.join(case.fixtures)}):\n    {case.given}\n")
    files = {"conftest.py": RECORDER, CALLS_FILE: PRELUDE + "\n\n" + "\n\n".join(tests)}
    for case in cases:
        if case.where == "marker":
            files[marker_file(case)] = (
                "import pytest\nfrom pytest_startup_guard import on_access, placed\n\n\n"
                + case.given
            )
    return files


def marker_file(case: Misuse) -> str:
    return f"test_marker_{case.id}.py"


def grouped_outcomes(
    folder: Path, cases: list[Misuse], run: Callable[..., object]
) -> dict[str, Outcome]:
    """Run every ``api``, ``fixture`` and ``marker`` case in one pytest (``run(*args)``, in
    ``folder``) and read how each ended."""
    for name, text in grouped_files(cases).items():
        (folder / name).write_text(text, encoding="utf-8")
    results = folder / RESULTS_FILE
    results.unlink(missing_ok=True)
    run(*INNER_ARGS, CALLS_FILE, *(marker_file(c) for c in cases if c.where == "marker"))
    entries = (
        [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
        if results.exists()
        else []
    )
    outcomes: dict[str, Outcome] = {}
    for case in cases:
        if case.where == "marker":
            texts = [e["text"] for e in entries if e.get("file") == marker_file(case)]
            text = "\n".join(texts)
            outcomes[case.id] = Outcome(bool(texts), not RAISED.search(text), text, text)
        elif case.where in ("api", "fixture"):
            mine = [e for e in entries if e.get("case") == case.id]
            first = next((e for e in mine if e["failed"]), mine[0] if mine else None)
            if first is not None:
                outcomes[case.id] = Outcome(
                    first["failed"], OWN_ERROR in first["kinds"], first["message"], first["text"]
                )
    return outcomes


def configure_outcome(returncode: int, stdout: str, stderr: str) -> Outcome:
    """An ``option``, ``env`` or ``ini`` case: pytest must stop with a usage error."""
    errors = [line for line in stderr.splitlines() if line.startswith("ERROR: ")]
    return Outcome(
        returncode != 0,
        returncode == pytest.ExitCode.USAGE_ERROR and bool(errors),
        "\n".join(errors),
        stdout + stderr,
    )


def configure_args(case: Misuse) -> tuple[list[str], dict[str, str], str]:
    """The command line, the environment and the ini file of a configuration case."""
    args = [*shlex.split(case.given)] if case.where == "option" else list(case.args)
    env = dict([case.given.split("=", 1)]) if case.where == "env" else {}
    ini = f"[pytest]\n{case.given}\n" if case.where == "ini" else ""
    return ["-p", "startup_guard", "-p", "no:cacheprovider", *args, "test_plain.py"], env, ini


def cli_outcome(case: Misuse, folder: Path) -> Outcome:
    """A ``cli`` case: ``startup-guard-report`` run in ``folder``; it must exit 2 with its own
    error line."""
    stdout, stderr = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = report_main(shlex.split(case.given))
            except SystemExit as exit:  # argparse's usage errors
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        os.chdir(here)
    text = stderr.getvalue()
    errors = [
        line
        for line in text.splitlines()
        if re.match(r"startup-guard-report( \w+)?: error: ", line)
    ]
    return Outcome(code != 0, code == 2 and bool(errors), "\n".join(errors), text)


# -- the suite -------------------------------------------------------------------------------

_GROUPED: dict[str, dict[str, Outcome]] = {}  # one inner run per worker, read by every case


def _grouped(pytester: pytest.Pytester) -> dict[str, Outcome]:
    if "run" not in _GROUPED:
        _GROUPED["run"] = grouped_outcomes(
            pytester.path, CASES, lambda *args: pytester.runpytest_subprocess(*args, timeout=600)
        )
    return _GROUPED["run"]


def test_there_are_at_least_100_cases_over_every_kind_of_input() -> None:
    assert len(CASES) >= 100
    assert len({case.id for case in CASES}) == len(CASES), "case ids must be unique"
    assert {case.where for case in CASES} == {
        "api",
        "fixture",
        "marker",
        "option",
        "env",
        "ini",
        "cli",
    }
    for case in CASES:
        assert len(case.words) >= 2, f"{case.id}: name the argument and the bad value"


@pytest.mark.parametrize("case", CASES, ids=[f"{case.where}-{case.id}" for case in CASES])
def test_misuse_is_a_clear_error(
    case: Misuse, guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_scratch_files(guard_pytester.path)
    if case.where in ("api", "fixture", "marker"):
        outcome = _grouped(guard_pytester).get(case.id, NOT_RUN)
    elif case.where == "cli":
        outcome = cli_outcome(case, guard_pytester.path)
    else:
        args, env, ini = configure_args(case)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        if ini:
            guard_pytester.makeini(ini)
        result = guard_pytester.runpytest(*args)
        outcome = configure_outcome(result.ret, result.stdout.str(), result.stderr.str())
    problems = outcome.problems(case)
    assert not problems, f"{case.where} misuse {case.id}: {case.given}\n" + "\n".join(
        [*problems, "--- what the user reads:", outcome.shown[-3000:]]
    )


def test_a_misspelt_variable_is_named_with_the_one_meant(
    guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warning, not an error (the child runtime passes variables of its own to every process
    of a test, a pytest run among them), but never silent."""
    make_scratch_files(guard_pytester.path)
    monkeypatch.setenv("STARTUP_GUARD_TIMOUT", "5")
    monkeypatch.setenv("STARTUP_GUARD_MEMBER", "g1:0")  # the runtime's own: left alone
    result = guard_pytester.runpytest("-p", "startup_guard", "-p", "no:cacheprovider", "-rw")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*startup-guard: STARTUP_GUARD_TIMOUT='5' is not a setting of the plugin and is"
            " ignored; did you mean STARTUP_GUARD_TIMEOUT (--startup-guard-timeout)?*"
        ]
    )
    assert "STARTUP_GUARD_MEMBER" not in result.stdout.str()


def test_a_race_armed_after_the_launch_says_to_arm_it_first(
    guard_pytester: pytest.Pytester,
) -> None:
    """Arming after the launch is not an error where it is made (a later launch may meet the
    race), but the race that never hit then says why: it came after the fleet's release."""
    guard_pytester.makepyfile(
        test_late=PRELUDE
        + """

def test_late(server_fleet, hub_race, hub_cache):
    server_fleet.launch(UP, ready=ready.log('up'))
    hub_race.arm('pointer_swap', a_repo(hub_cache), 'config.json')
"""
    )
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*race pointer_swap on config.json of org/model@main * never hit: * It was armed after"
            " the test's last server_fleet.launch() had released its fleet: arm a race before the"
            " launch whose start-up should meet it.*"
        ]
    )
