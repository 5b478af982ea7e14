"""The plugin as pytest loads it: entry point, -p, -p no:, options, ini keys and markers."""

from __future__ import annotations

import subprocess
import sys

import pytest

PASSING_TEST = """
def test_uses_cache(hub_cache):
    assert hub_cache.root.is_dir()
"""


def test_loaded_with_dash_p_when_autoload_is_off(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(PASSING_TEST)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["startup-guard: target=*, seed=*, timeout=60s (default)"])


def test_absent_without_dash_p_when_autoload_is_off(guard_pytester: pytest.Pytester) -> None:
    guard_pytester.makepyfile(PASSING_TEST)
    result = guard_pytester.runpytest_subprocess()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'hub_cache' not found*"])
    result.stdout.no_fnmatch_line("startup-guard:*")


def test_autoloaded_and_turned_off_with_no(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    pytester.makepyfile(PASSING_TEST)
    autoloaded = pytester.runpytest_subprocess()
    autoloaded.assert_outcomes(passed=1)
    autoloaded.stdout.fnmatch_lines(["startup-guard: target=*"])
    disabled = pytester.runpytest_subprocess("-p", "no:startup_guard")
    disabled.assert_outcomes(errors=1)
    disabled.stdout.no_fnmatch_line("startup-guard:*")


def test_markers_are_documented_and_strict_markers_accepts_them(
    guard_pytester: pytest.Pytester,
) -> None:
    guard_pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cpu
        @pytest.mark.cuda
        @pytest.mark.rocm
        def test_marked():
            pass
        """
    )
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "--strict-markers", "--startup-target=cpu"
    )
    result.assert_outcomes(passed=1)
    markers = guard_pytester.runpytest_subprocess("-p", "startup_guard", "--markers")
    markers.stdout.fnmatch_lines(
        [
            "@pytest.mark.cpu: run only where the start-up target is cpu*",
            "@pytest.mark.cuda: run only where the start-up target is cuda*",
            "@pytest.mark.rocm: run only where the start-up target is rocm*",
            "@pytest.mark.startup_races(transient=[[]...[]], corrupt=[[]...[]], stale=[[]...[]]): *",
        ]
    )


def test_every_option_is_in_one_help_group(guard_pytester: pytest.Pytester) -> None:
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "--help")
    result.stdout.fnmatch_lines(
        [
            "start-up races (pytest-startup-guard):",
            "*--startup-target={auto,cpu,cuda,rocm}*",
            "*--startup-guard-seed=N*",
            "*--startup-guard-timeout=SECONDS*",
            "*--startup-guard-report=PATH*",
            "*--startup-guard-artifacts=DIR*",
            "*--startup-guard-strict-reruns*",
        ]
    )
    result.stdout.fnmatch_lines(["*startup_guard_timeout_rocm*", "*startup_guard_allow_reruns (*"])


def test_strict_config_accepts_every_ini_key(guard_pytester: pytest.Pytester) -> None:
    keys = [
        "startup_guard_target = cpu",
        "startup_guard_seed = 7",
        "startup_guard_timeout = 30",
        "startup_guard_timeout_rocm = 90",
        "startup_guard_timeout_cuda = 45",
        "startup_guard_timeout_cpu = 20",
        "startup_guard_report = report.json",
        "startup_guard_artifacts = artifacts",
        "startup_guard_strict_reruns = false",
        "startup_guard_allow_reruns = false",
        "startup_guard_allow_reruns_rocm = true",
    ]
    guard_pytester.makeini("[pytest]\n" + "\n".join(keys) + "\n")
    guard_pytester.makepyfile(PASSING_TEST)
    result = guard_pytester.runpytest_subprocess("-p", "startup_guard", "--strict-config")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["startup-guard: target=cpu (from startup_guard_target in tox.ini)*"]
    )
    result.stdout.fnmatch_lines(
        [
            "*seed=7 (startup_guard_seed in tox.ini)*timeout=20s (startup_guard_timeout_cpu in tox.ini)"
        ]
    )


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (
            {},
            ["--startup-guard-timeout=-1"],
            "invalid --startup-guard-timeout '-1' (command line): expected a positive number of"
            " seconds (at most 86400: a day)",
        ),
        (
            {"ini": "startup_guard_timeout = soon"},
            [],
            "invalid startup_guard_timeout 'soon' in tox.ini: expected a positive number of seconds"
            " (at most 86400: a day)",
        ),
        (
            {"env": ("STARTUP_GUARD_SEED", "lucky")},
            [],
            "invalid STARTUP_GUARD_SEED 'lucky' (environment variable): expected a whole number*",
        ),
        (
            {},
            ["--startup-target=tpu"],
            "invalid --startup-target 'tpu' (command line): expected one of auto, cpu, cuda, rocm",
        ),
        (
            {"ini": "startup_guard_strict_reruns = maybe"},
            [],
            "invalid startup_guard_strict_reruns 'maybe' in tox.ini: expected true or false*",
        ),
        (
            {},
            ["-o", "startup_guard_timeout=0"],
            "invalid startup_guard_timeout '0' in -o startup_guard_timeout=0: *",
        ),
    ],
)
def test_bad_values_name_value_source_and_what_is_accepted(
    guard_pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    setup: dict[str, object],
    args: list[str],
    message: str,
) -> None:
    if "ini" in setup:
        guard_pytester.makeini(f"[pytest]\n{setup['ini']}\n")
    if "env" in setup:
        name, value = setup["env"]  # type: ignore[misc]
        monkeypatch.setenv(name, value)
    guard_pytester.makepyfile(PASSING_TEST)
    result = guard_pytester.runpytest("-p", "startup_guard", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_precedence_cli_over_env_over_target_ini_over_ini(
    guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    guard_pytester.makeini(
        "[pytest]\nstartup_guard_timeout = 11\nstartup_guard_timeout_rocm = 22\n"
    )
    guard_pytester.makepyfile(PASSING_TEST)

    def header(*args: str) -> str:
        result = guard_pytester.runpytest("-p", "startup_guard", "--startup-target=rocm", *args)
        return next(line for line in result.outlines if line.startswith("startup-guard:"))

    assert "timeout=22s (startup_guard_timeout_rocm in tox.ini)" in header()
    monkeypatch.setenv("STARTUP_GUARD_TIMEOUT", "33")
    assert "timeout=33s (STARTUP_GUARD_TIMEOUT)" in header()
    assert "timeout=44s (--startup-guard-timeout)" in header("--startup-guard-timeout=44")
    monkeypatch.delenv("STARTUP_GUARD_TIMEOUT")
    assert "timeout=11s (startup_guard_timeout in tox.ini)" in header("--startup-target=cuda")


def test_plugin_import_loads_standard_library_and_pytest_only() -> None:
    code = (
        "import sys; before = set(sys.modules); import pytest_startup_guard.plugin; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; print(sorted(new))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(eval(output))
    heavy = loaded & {"torch", "transformers", "huggingface_hub", "filelock", "psutil", "numpy"}
    assert not heavy, f"plugin import pulled in {sorted(heavy)}"
    third_party = (
        loaded
        - set(sys.stdlib_module_names)
        - {
            "pytest",
            "_pytest",
            "py",
            "pluggy",
            "iniconfig",
            "packaging",
            "pytest_startup_guard",
            "exceptiongroup",
            "tomli",
            "pygments",
            "colorama",
        }
    )
    assert not third_party, f"plugin import pulled in {sorted(third_party)}"
