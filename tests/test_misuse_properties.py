"""Property-based misuse (issue 42): every value a strategy of ``misuse_properties.py`` draws
for a launch keyword, a fault's or probe's argument, a numeric keyword or a numeric setting is
refused by the plugin's own error at the call, naming the argument; and no launch starts a
member (its command would say so: it leaves a file and exits at once).

The launch properties run as users run them: one pytest with ``-p startup_guard`` and the real
``server_fleet`` fixture, each property a test that records how every example ended; each test
here reads its property's record. The constructors' properties run in this process; the
settings' through pytester in process (one short pytest per example, stopped before its test).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from misuse_properties import (
    SETTING_TEXT,
    bad_seconds,
    bad_whole,
    explore,
    refusal_problem,
    valid_seconds,
    valid_whole,
)

from pytest_startup_guard import (
    after,
    chaos,
    check_env_choices,
    cpu_load,
    fs_error,
    interleave,
    listen_late,
    network_fs,
    on_access,
    port_stolen,
    port_taken,
    ready,
    same_port,
)

HERE = Path(__file__).parent
RESULTS = "properties.jsonl"

# -- the launch, in a pytest of its own ----------------------------------------------------------

LAUNCH_TESTS = '''
import json
import sys
from pathlib import Path

from hypothesis import strategies as st
from misuse_properties import MAX_MEMBERS, bad_seconds, bad_whole, beyond, explore, refusal_problem

from pytest_startup_guard import (
    fs_error, interleave, listen_late, network_fs, port_stolen, port_taken, ready, same_port,
)

RESULTS = Path(__file__).parent / "properties.jsonl"
KEYWORDS = {"count", "ready", "env", "timeout", "cwd", "warm", "preload", "native_accesses",
            "cache", "ports", "faults", "workers"}  # docs/fleet.md's list


def judge(name, server_fleet, tmp_path, strategy, launch, *words):
    """Every example of ``strategy`` refused at ``launch(loud_argv, example)``, nothing started."""
    marker = tmp_path / "a-member-started"
    loud = [sys.executable, "-c", f"open({str(marker)!r}, 'w'); raise SystemExit('started')"]

    def attempt(example):
        fleets = len(server_fleet.fleets)
        problem = refusal_problem(lambda: launch(loud, example), *words)
        if marker.exists() or len(server_fleet.fleets) > fleets:
            marker.unlink(missing_ok=True)
            return f"{problem or 'refused'}, after a member started"
        return problem

    ran, problems = explore(strategy, attempt)
    with RESULTS.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"property": name, "ran": ran, "problems": problems}) + "\\n")


LOG = ready.log("up")


def test_count(server_fleet, tmp_path):
    judge("count", server_fleet, tmp_path, bad_whole(1, MAX_MEMBERS),
          lambda argv, x: server_fleet.launch(argv, count=x, ready=LOG), "count=")


def test_timeout(server_fleet, tmp_path):
    judge("timeout", server_fleet, tmp_path, bad_seconds(positive=True),
          lambda argv, x: server_fleet.launch(argv, ready=LOG, timeout=x), "timeout=")


def test_workers(server_fleet, tmp_path):
    judge("workers", server_fleet, tmp_path, bad_whole(1, MAX_MEMBERS, none_ok=True),
          lambda argv, x: server_fleet.launch(argv, ready=LOG, workers=x), "workers=")


BAD_NAMES = st.one_of(
    st.integers(), st.just(""), st.binary(min_size=1, max_size=3),
    st.text(max_size=4).map(lambda text: text + "=x"), st.text(max_size=4).map(lambda t: t + "\\0"),
    st.from_regex(r"[A-Z_]{0,12}", fullmatch=True).map(lambda text: "STARTUP_GUARD_" + text),
)
BAD_VALUES = st.one_of(
    st.integers(), st.none(), st.binary(max_size=3), st.floats(),
    st.text(max_size=4).map(lambda text: text + "\\0"),
)
BAD_ENV = st.one_of(
    st.dictionaries(BAD_NAMES, st.text(max_size=3), min_size=1, max_size=2),
    st.dictionaries(st.from_regex(r"[A-Z]{1,6}", fullmatch=True), BAD_VALUES, min_size=1,
                    max_size=2),
    st.one_of(st.text(max_size=3), st.lists(st.text(max_size=3), max_size=2), st.integers()),
)


def test_env(server_fleet, tmp_path):
    judge("env", server_fleet, tmp_path, BAD_ENV,
          lambda argv, x: server_fleet.launch(argv, ready=LOG, env=x), "env")


BAD_PORTS = st.one_of(
    st.lists(st.integers(1024, 65535), max_size=4).filter(lambda ports: len(ports) != 2),
    st.lists(bad_whole(1, 65535), min_size=2, max_size=2),
    st.text(max_size=5), st.integers(),
)


def test_ports(server_fleet, tmp_path):
    judge("ports", server_fleet, tmp_path, BAD_PORTS,
          lambda argv, x: server_fleet.launch(argv + ["{port}"], count=2, ready=LOG, ports=x),
          "ports")


FAULTS = {
    "fs_error": lambda path, k: [fs_error("EIO", path, member=k)],
    "network_fs": lambda path, k: network_fs(path, members=[0, k]),
    "interleave then": lambda path, k: [interleave(path, first=(0, 1), then=(k, 1))],
    "interleave first": lambda path, k: [interleave(path, first=(k, 1), then=(0, 1))],
    "listen_late": lambda path, k: [listen_late(k)],
    "listen_late peers": lambda path, k: [listen_late(0, peers=[k])],
    "port_taken": lambda path, k: [port_taken(k)],
    "port_stolen": lambda path, k: [port_stolen(k)],
    "port_stolen by": lambda path, k: [port_stolen(0, by=k)],
    "same_port": lambda path, k: [same_port((0, k))],
}


def test_fault_members(server_fleet, tmp_path):
    judge("faults' member indexes", server_fleet, tmp_path,
          st.tuples(st.sampled_from(sorted(FAULTS)), beyond(2)),
          lambda argv, x: server_fleet.launch(argv + ["{port}"], count=2, ready=LOG,
                                              faults=FAULTS[x[0]](tmp_path, x[1])),
          "member")


LOOKALIKES = st.tuples(
    st.sampled_from(["", " "]),
    st.sampled_from(["port", "index", "count", "port0", "port1"]),
    st.sampled_from([":x", ":>5", ":d", "!r", "!s", "-1", "+1", "*2", " ", "[0]", ".real"]),
).map(lambda parts: "--x={" + parts[0] + parts[1] + parts[2] + "}")


def test_placeholders(server_fleet, tmp_path):
    judge("argv placeholders", server_fleet, tmp_path, LOOKALIKES,
          lambda argv, x: server_fleet.launch(argv + [x], count=2, ready=LOG), "placeholder")


NOT_PROBES = st.sampled_from([
    ready.Http, ready.Tcp, ready.Log, ready.File, ready.Call, ready.http, ready.tcp, ready.log,
    "up", 3, None, b"up", ["up"], object(),
])


def test_ready(server_fleet, tmp_path):
    judge("ready", server_fleet, tmp_path, NOT_PROBES,
          lambda argv, x: server_fleet.launch(argv, ready=x), "ready=")


PORT_PROBES = st.sampled_from([
    ready.tcp(), ready.http(), ready.http("/x", status=204), ready.file("x-{port}.ready"),
])


def test_port_probe_without_port(server_fleet, tmp_path):
    judge("a port probe, no {port}", server_fleet, tmp_path, PORT_PROBES,
          lambda argv, x: server_fleet.launch(argv, count=2, ready=x), "{port}")


UNKNOWN = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True).filter(lambda k: k not in KEYWORDS)


def test_unknown_keyword(server_fleet, tmp_path):
    judge("unknown keywords", server_fleet, tmp_path, UNKNOWN,
          lambda argv, x: server_fleet.launch(argv, ready=LOG, **{x: 1}), "unexpected keyword")
'''

LAUNCH_PROPERTIES = [
    "count",
    "timeout",
    "workers",
    "env",
    "ports",
    "faults' member indexes",
    "argv placeholders",
    "ready",
    "a port probe, no {port}",
    "unknown keywords",
]
_LAUNCHED: dict[str, dict[str, dict[str, Any]]] = {}  # one inner run per worker


def _launch_records(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    if "run" not in _LAUNCHED:
        pytester.makepyfile(
            misuse_properties=(HERE / "misuse_properties.py").read_text(encoding="utf-8"),
            test_launch_properties=LAUNCH_TESTS,
        )
        result = pytester.runpytest_subprocess(
            "-p", "startup_guard", "-p", "no:cacheprovider", "-p", "timeout", "--timeout=300",
            "-q", "test_launch_properties.py", timeout=600,
        )  # fmt: skip
        lines = (pytester.path / RESULTS).read_text(encoding="utf-8").splitlines()
        records = {record["property"]: record for record in map(json.loads, lines)}
        _LAUNCHED["run"] = records
        assert result.ret == 0, result.stdout.str()[-3000:]
    return _LAUNCHED["run"]


@pytest.mark.parametrize("name", LAUNCH_PROPERTIES)
def test_every_misuse_of_a_launch_is_refused_at_the_call(
    guard_pytester: pytest.Pytester, name: str
) -> None:
    record = _launch_records(guard_pytester).get(name)
    assert record is not None, f"the property {name!r} did not run"
    assert record["ran"] >= 4, record
    _assert_refused(f"server_fleet.launch(): {name}", record["ran"], record["problems"])


def _assert_refused(name: str, ran: int, problems: list[str]) -> None:
    assert not problems, f"{name}: {len(problems)} of {ran} generated misuses not refused:\n" + (
        "\n".join(problems[:15])
    )


# -- constructors and numeric keywords, in this process --------------------------------------

SECONDS = bad_seconds(positive=True, none_ok=False)
NON_NEGATIVE_SECONDS = bad_seconds(positive=False, none_ok=False)
# Callables that cannot take the one argument a probe passes.
WRONG_ARITY = st.sampled_from(
    [lambda: True, lambda a, b: True, lambda *, body: True, lambda a, b, *c: True]
)
PY = sys.executable


def _keyword_cases(tmp: Path) -> dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], object]]]:
    """name -> (what is wrong for the keyword, the call that must refuse it); the name starts
    with the words the error must say."""
    return {
        "nth= fs_error()": (bad_whole(1), lambda x: fs_error("EIO", tmp, nth=x)),
        "times= fs_error()": (bad_whole(1, none_ok=True), lambda x: fs_error("EIO", tmp, times=x)),
        "member= fs_error()": (
            bad_whole(0, none_ok=True),
            lambda x: fs_error("EIO", tmp, member=x),
        ),
        "delay= network_fs()": (NON_NEGATIVE_SECONDS, lambda x: network_fs(tmp, delay=x)),
        "members network_fs()": (
            st.lists(bad_whole(0), min_size=2, max_size=3),
            lambda x: network_fs(tmp, members=x),
        ),
        "timeout= interleave()": (
            SECONDS,
            lambda x: interleave(tmp, first=(0, 1), then=(1, 1), timeout=x),
        ),
        "then interleave()": (
            st.tuples(bad_whole(0), st.just(1)),
            lambda x: interleave(tmp, first=(0, 1), then=x),
        ),
        "timeout= listen_late()": (SECONDS, lambda x: listen_late(0, timeout=x)),
        "member= listen_late()": (bad_whole(0), lambda x: listen_late(x)),
        "hold= port_taken()": (bad_seconds(positive=True), lambda x: port_taken(0, hold=x)),
        "member= port_taken()": (bad_whole(0), lambda x: port_taken(x)),
        "hold= port_stolen()": (bad_seconds(positive=True), lambda x: port_stolen(0, hold=x)),
        "by= port_stolen()": (bad_whole(0, none_ok=True), lambda x: port_stolen(0, by=x)),
        "members= same_port()": (st.tuples(bad_whole(0), st.just(1)), lambda x: same_port(x)),
        "nth= on_access()": (bad_whole(1, none_ok=True), lambda x: on_access(nth=x)),
        "hold= on_access()": (bad_seconds(positive=False), lambda x: on_access(hold=x)),
        "seconds= after()": (NON_NEGATIVE_SECONDS, lambda x: after(x)),
        "gap= chaos()": (SECONDS, lambda x: chaos(gap=x)),
        "limit= cpu_load()": (SECONDS, lambda x: cpu_load(0, limit=x).__enter__()),
        "status= ready.http()": (bad_whole(100, 599), lambda x: ready.http("/h", status=x)),
        "expect= ready.http()": (WRONG_ARITY, lambda x: ready.http("/h", expect=x)),
        "function= ready.call()": (WRONG_ARITY, lambda x: ready.call(x)),
        "allowed= check_env_choices()": (
            st.text(min_size=1, max_size=6),
            lambda x: check_env_choices([PY, "-c", "raise SystemExit(3)"], "X", x),
        ),
        "unlisted= check_env_choices()": (
            st.text(min_size=1, max_size=6),
            lambda x: check_env_choices([PY, "-c", "raise SystemExit(3)"], "X", ["a"], unlisted=x),
        ),
    }


KEYWORD_CASES = sorted(_keyword_cases(Path("/")))


@pytest.mark.parametrize("name", KEYWORD_CASES)
def test_every_misuse_of_a_keyword_is_refused_at_the_call(tmp_path: Path, name: str) -> None:
    strategy, call = _keyword_cases(tmp_path)[name]
    argument, where = name.split(" ", 1)
    ran, problems = explore(strategy, lambda x: refusal_problem(lambda: call(x), argument, where))
    _assert_refused(name, ran, problems)


# -- numeric settings: option, environment variable, ini key ---------------------------------

SETTINGS: dict[str, Callable[[str], bool]] = {
    "timeout": valid_seconds,
    "seed": valid_whole(0, 2**32 - 1, base=0),
    "stress": valid_whole(1, 10_000),
}
SOURCES = ("option", "env", "ini")


def _named(setting: str, source: str) -> str:
    if source == "option":
        return f"--startup-guard-{setting}"
    return f"STARTUP_GUARD_{setting.upper()}" if source == "env" else f"startup_guard_{setting}"


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_every_misuse_of_a_numeric_setting_is_a_usage_error(
    guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    guard_pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    valid = SETTINGS[setting]
    drawn = st.tuples(st.sampled_from(SOURCES), SETTING_TEXT.filter(lambda text: not valid(text)))

    def attempt(example: tuple[str, str]) -> str | None:
        source, text = example
        name = _named(setting, source)
        args = ["-p", "startup_guard", "-p", "no:cacheprovider", "test_plain.py"]
        guard_pytester.makeini(f"[pytest]\n{name} = {text}\n" if source == "ini" else "")
        with monkeypatch.context() as patched:
            if source == "env":
                patched.setenv(name, text)
            if source == "option":
                args.append(f"{name}={text}")
            result = guard_pytester.runpytest(*args)
        errors = [line for line in result.stderr.lines if line.startswith("ERROR: invalid ")]
        if result.ret != pytest.ExitCode.USAGE_ERROR or not errors:
            return f"pytest ended {result.ret!r}: {(result.stderr.str() or result.stdout.str())[-300:]}"
        return None if name in errors[0] and "expected" in errors[0] else f"says {errors[0]!r}"

    ran, problems = explore(drawn, attempt, examples=20)
    _assert_refused(f"{setting} (option, env, ini)", ran, problems)


def test_the_strategies_draw_only_misuses() -> None:
    """A strategy that drew a valid value would make its property fail for the wrong reason:
    the limits they assume are the plugin's own."""
    from pytest_startup_guard.checks import MAX_SECONDS
    from pytest_startup_guard.fleet.spec import MAX_MEMBERS

    assert MAX_SECONDS == 86400.0
    assert MAX_MEMBERS == 256
    assert not valid_seconds("1e300") and not valid_seconds("nan") and valid_seconds("86400")
    assert math.isclose(float("1e-400"), 0.0)
    assert not valid_seconds("1e-400")
