"""Targets: detection on faked machines, the cpu/cuda/rocm markers, per-target settings, JUnit
properties and the CI matrix example.

Detection is tested two ways: directly, as the pure function it is (``detect_target(root,
environ, path, modules)`` over a fake machine folder), and through the plugin, in inline
pytester runs where the process itself looks like the fake machine (``MACHINE_ROOT`` pointed at
its folder, ``PATH`` holding only its programs, its variables set).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from pytest_startup_guard.settings import options
from pytest_startup_guard.targets import detection as targets
from pytest_startup_guard.targets.detection import TARGETS, Detection, contradiction, detect_target

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
GPU_VARIABLES = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ROCM_PATH", "ROCM_HOME")


class FakeMachine:
    """A machine in a folder: files under its root, programs on a PATH of its own, variables."""

    def __init__(self, base: Path) -> None:
        self.root = base / "machine"
        self.bin = base / "machine-bin"
        self.root.mkdir()
        self.bin.mkdir()
        self.environ: dict[str, str] = {"PATH": str(self.bin)}

    def file(self, path: str) -> FakeMachine:
        where = self.root / path.lstrip("/")
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text("")
        return self

    def folder(self, path: str) -> FakeMachine:
        (self.root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
        return self

    def program(self, name: str, *, executable: bool = True) -> FakeMachine:
        program = self.bin / name
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(0o755 if executable else 0o644)
        return self

    def variable(self, name: str, value: str) -> FakeMachine:
        self.environ[name] = value
        return self

    def add(self, kind: str, name: str, value: str = "") -> FakeMachine:
        if kind == "variable":
            return self.variable(name, value)
        adder = {"file": self.file, "folder": self.folder, "program": self.program}[kind]
        return adder(name)

    def detect(self, torch: object = None) -> Detection:
        modules = {} if torch is None else {"torch.version": torch}
        return detect_target(str(self.root), self.environ, modules=modules)

    def become(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Make this process (and inline pytest runs in it) look like this machine."""
        monkeypatch.setattr(targets, "MACHINE_ROOT", str(self.root))
        for name in GPU_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in self.environ.items():
            monkeypatch.setenv(name, value)


@pytest.fixture
def machine(tmp_path: Path) -> FakeMachine:
    return FakeMachine(tmp_path)


def torch_module(*, hip: str | None = None, cuda: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(hip=hip, cuda=cuda)


def header(result: pytest.RunResult) -> str:
    return next(line for line in result.outlines if line.startswith("startup-guard: target="))


# -- detection as a pure function ----------------------------------------------------------


class TestDetection:
    def test_no_signal_is_cpu(self, machine: FakeMachine) -> None:
        detection = machine.detect()
        assert (detection.target, detection.reason) == ("cpu", "no GPU signal")
        assert detection.signals == ()

    @pytest.mark.parametrize(
        ("kind", "name", "value", "target", "reason"),
        [
            ("file", "/dev/kfd", "", "rocm", "from /dev/kfd"),
            ("folder", "/opt/rocm/bin", "", "rocm", "from ROCm install at /opt/rocm"),
            ("file", "/opt/rocm/.info/version", "", "rocm", "from ROCm install at /opt/rocm"),
            ("program", "rocminfo", "", "rocm", "from rocminfo on PATH"),
            ("program", "rocm-smi", "", "rocm", "from rocm-smi on PATH"),
            ("variable", "HIP_VISIBLE_DEVICES", "0", "rocm", "from HIP_VISIBLE_DEVICES=0"),
            ("variable", "ROCR_VISIBLE_DEVICES", "1", "rocm", "from ROCR_VISIBLE_DEVICES=1"),
            ("file", "/dev/nvidiactl", "", "cuda", "from /dev/nvidiactl"),
            (
                "file",
                "/proc/driver/nvidia/version",
                "",
                "cuda",
                "from /proc/driver/nvidia/version",
            ),
            ("program", "nvidia-smi", "", "cuda", "from nvidia-smi on PATH"),
        ],
    )
    def test_each_signal_alone(
        self, machine: FakeMachine, kind: str, name: str, value: str, target: str, reason: str
    ) -> None:
        detection = machine.add(kind, name, value).detect()
        assert (detection.target, detection.reason, detection.ambiguous) == (target, reason, False)

    def test_rocm_install_where_rocm_path_says(self, machine: FakeMachine) -> None:
        machine.variable("ROCM_PATH", "/sw/rocm-6.2")
        assert machine.detect().target == "cpu"  # a variable pointing nowhere is no install
        machine.folder("/sw/rocm-6.2/bin")
        assert machine.detect().reason == "from ROCm install at /sw/rocm-6.2"

    def test_look_alikes_are_not_signals(self, machine: FakeMachine) -> None:
        machine.variable("HIP_VISIBLE_DEVICES", "").variable("ROCR_VISIBLE_DEVICES", "  ")
        machine.program("nvidia-smi", executable=False)
        machine.folder("/opt/rocm")  # an empty folder, no bin/ and no .info/version
        (machine.bin / "rocminfo").mkdir()
        machine.file("/dev/nvidia0-not-ctl")
        assert machine.detect() == Detection("cpu", "no GPU signal", (), None)

    def test_missing_path_finds_no_program(self, machine: FakeMachine) -> None:
        machine.program("nvidia-smi")
        del machine.environ["PATH"]
        assert machine.detect().target == "cpu"
        assert detect_target(str(machine.root), {}, path=str(machine.bin)).target == "cuda"

    @pytest.mark.parametrize(
        ("signals", "target", "reason"),
        [
            (
                [("file", "/dev/kfd"), ("program", "nvidia-smi")],
                "rocm",
                "from /dev/kfd; also saw cuda signs: nvidia-smi on PATH",
            ),
            (
                [("file", "/dev/nvidiactl"), ("program", "rocminfo"), ("folder", "/opt/rocm/bin")],
                "cuda",
                "from /dev/nvidiactl; also saw rocm signs: ROCm install at /opt/rocm,"
                " rocminfo on PATH",
            ),
            (
                [("program", "nvidia-smi"), ("variable", "HIP_VISIBLE_DEVICES")],
                "cuda",
                "from nvidia-smi on PATH; also saw rocm signs: HIP_VISIBLE_DEVICES=0",
            ),
        ],
    )
    def test_stronger_signal_wins_a_conflict(
        self, machine: FakeMachine, signals: list[tuple[str, str]], target: str, reason: str
    ) -> None:
        for kind, name in signals:
            machine.add(kind, name, "0")
        detection = machine.detect()
        assert (detection.target, detection.reason, detection.ambiguous) == (target, reason, False)

    def test_equally_strong_conflict_is_ambiguous(self, machine: FakeMachine) -> None:
        machine.file("/dev/kfd").file("/dev/nvidiactl")
        detection = machine.detect()
        assert detection.ambiguous
        assert detection.target == "rocm"  # an exact tie goes to rocm
        assert (
            detection.reason == "from /dev/kfd; also saw equally strong cuda signs: /dev/nvidiactl"
        )
        machine.file("/proc/driver/nvidia/version")
        assert machine.detect().target == "cuda"  # more evidence
        assert machine.detect().ambiguous

    def test_imported_torch_breaks_a_tie_and_confirms(self, machine: FakeMachine) -> None:
        machine.file("/dev/kfd").file("/dev/nvidiactl")
        cuda_torch = machine.detect(torch=torch_module(cuda="12.4"))
        assert (cuda_torch.target, cuda_torch.ambiguous) == ("cuda", False)
        assert (
            cuda_torch.reason
            == "from /dev/nvidiactl and torch's build; also saw rocm signs: /dev/kfd"
        )
        (machine.root / "dev" / "nvidiactl").unlink()
        rocm_torch = machine.detect(torch=torch_module(hip="6.2.41133"))
        assert rocm_torch.reason == "from /dev/kfd, confirmed by torch"

    def test_torch_never_decides_alone(self, machine: FakeMachine) -> None:
        # CUDA builds of torch are what `pip install torch` gives on a laptop.
        detection = machine.detect(torch=torch_module(cuda="12.4"))
        assert (detection.target, detection.torch_build) == ("cpu", "cuda")
        machine.file("/dev/kfd")
        assert machine.detect(torch=torch_module(cuda="12.4")).target == "rocm"
        assert machine.detect(torch=torch_module()).torch_build == "cpu"

    def test_defaults_look_at_this_process(
        self, machine: FakeMachine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        machine.program("rocminfo").become(monkeypatch)
        assert detect_target().reason == "from rocminfo on PATH"
        monkeypatch.setenv("PATH", "")
        monkeypatch.setenv("HIP_VISIBLE_DEVICES", "2")
        assert detect_target().reason == "from HIP_VISIBLE_DEVICES=2"

    def test_imports_nothing_but_the_standard_library(self) -> None:
        code = (
            "import sys; before = set(sys.modules)\n"
            "from pytest_startup_guard.targets.detection import detect_target; detect_target()\n"
            "print(sorted({m.split('.')[0] for m in set(sys.modules) - before}"
            " - set(sys.stdlib_module_names)))"
        )
        completed = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert json.loads(completed.stdout.replace("'", '"')) == ["pytest_startup_guard"]

    @pytest.mark.parametrize(
        ("forced", "machine_files", "warning"),
        [
            (
                "cuda",
                ["/dev/kfd"],
                "target cuda was set by --startup-target, but this machine shows rocm"
                " (from /dev/kfd); tests marked cuda will run here anyway",
            ),
            (
                "rocm",
                [],
                "target rocm was set by --startup-target, but this machine shows no GPU signal;"
                " tests marked rocm will run here anyway",
            ),
            ("rocm", ["/dev/kfd"], None),
            ("cpu", ["/dev/nvidiactl"], None),
        ],
    )
    def test_contradiction(
        self, machine: FakeMachine, forced: str, machine_files: list[str], warning: str | None
    ) -> None:
        for file in machine_files:
            machine.file(file)
        assert contradiction(forced, "--startup-target", machine.detect()) == warning


# -- detection through the plugin ----------------------------------------------------------

TARGET_PROBE = """
def test_target(startup_target):
    assert startup_target == "{target}"
"""
PASSING = "def test_passes():\n    pass\n"


class TestPluginTarget:
    @pytest.mark.parametrize(
        ("kind", "name", "value", "expected"),
        [
            ("file", "/dev/kfd", "", "target=rocm (from /dev/kfd),*"),
            ("program", "nvidia-smi", "", "target=cuda (from nvidia-smi on PATH),*"),
            (
                "variable",
                "HIP_VISIBLE_DEVICES",
                "0,1",
                "target=rocm (from HIP_VISIBLE_DEVICES=0,1),*",
            ),
            ("none", "", "", "target=cpu (no GPU signal),*"),
        ],
    )
    def test_header_and_fixture_on_a_faked_machine(
        self,
        guard_pytester: pytest.Pytester,
        monkeypatch: pytest.MonkeyPatch,
        machine: FakeMachine,
        kind: str,
        name: str,
        value: str,
        expected: str,
    ) -> None:
        if kind != "none":
            machine.add(kind, name, value)
        machine.become(monkeypatch)
        target = expected.split("=")[1].split()[0]
        guard_pytester.makepyfile(TARGET_PROBE.format(target=target))
        result = guard_pytester.runpytest("-p", "startup_guard")
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([f"startup-guard: {expected}"])
        result.stdout.no_fnmatch_line("*startup-guard: target * was set by*")

    def test_precedence_cli_over_env_over_ini(
        self,
        guard_pytester: pytest.Pytester,
        monkeypatch: pytest.MonkeyPatch,
        machine: FakeMachine,
    ) -> None:
        machine.file("/dev/kfd").become(monkeypatch)
        guard_pytester.makepyfile(PASSING)
        guard_pytester.makeini("[pytest]\nstartup_guard_target = cpu\n")

        def target_line(*args: str) -> str:
            return header(guard_pytester.runpytest("-p", "startup_guard", *args)).split(",")[0]

        assert target_line() == "startup-guard: target=cpu (from startup_guard_target in tox.ini)"
        monkeypatch.setenv("STARTUP_GUARD_TARGET", "cuda")
        assert target_line() == "startup-guard: target=cuda (from STARTUP_GUARD_TARGET)"
        assert target_line("--startup-target=rocm") == (
            "startup-guard: target=rocm (from --startup-target)"
        )
        assert target_line("--startup-target=auto") == (
            "startup-guard: target=rocm (from /dev/kfd; auto from --startup-target)"
        )

    def test_forced_target_that_contradicts_the_machine_warns(
        self,
        guard_pytester: pytest.Pytester,
        monkeypatch: pytest.MonkeyPatch,
        machine: FakeMachine,
    ) -> None:
        machine.file("/dev/kfd").become(monkeypatch)
        guard_pytester.makepyfile(PASSING)
        result = guard_pytester.runpytest("-p", "startup_guard", "--startup-target=cuda")
        result.assert_outcomes(passed=1, warnings=1)
        result.stdout.fnmatch_lines(
            [
                "*PytestWarning: startup-guard: target cuda was set by --startup-target, but this"
                " machine shows rocm (from /dev/kfd); tests marked cuda will run here anyway"
            ]
        )
        for agreeing in ("rocm", "cpu"):
            quiet = guard_pytester.runpytest("-p", "startup_guard", f"--startup-target={agreeing}")
            quiet.assert_outcomes(passed=1)
            quiet.stdout.no_fnmatch_line("*was set by*")

    def test_ambiguous_machine_warns(
        self,
        guard_pytester: pytest.Pytester,
        monkeypatch: pytest.MonkeyPatch,
        machine: FakeMachine,
    ) -> None:
        machine.file("/dev/kfd").file("/dev/nvidiactl").become(monkeypatch)
        guard_pytester.makepyfile(TARGET_PROBE.format(target="rocm"))
        result = guard_pytester.runpytest("-p", "startup_guard")
        result.assert_outcomes(passed=1, warnings=1)
        result.stdout.fnmatch_lines(
            ["*startup-guard: target detection is ambiguous: chose rocm (from /dev/kfd; *"]
        )


# -- markers -------------------------------------------------------------------------------

MARKED_TESTS = """
import pytest

def test_unmarked():
    pass

@pytest.mark.cpu
def test_cpu():
    pass

@pytest.mark.cuda
def test_cuda():
    pass

@pytest.mark.rocm
def test_rocm():
    pass

@pytest.mark.cuda
@pytest.mark.rocm
def test_gpu():
    pass

@pytest.mark.rocm
class TestRocmClass:
    def test_in_class(self):
        pass

@pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.cuda)])
def test_param(n):
    pass
"""


class TestMarkers:
    @pytest.mark.parametrize(
        ("target", "passed", "skips"),
        [
            (
                "cuda",
                ["test_unmarked", "test_cuda", "test_gpu", "test_param[[]1]", "test_param[[]2]"],
                ["needs cpu; this runner is cuda", "needs rocm; this runner is cuda"],
            ),
            (
                "rocm",
                ["test_unmarked", "test_rocm", "test_gpu", "test_in_class", "test_param[[]1]"],
                ["needs cpu; this runner is rocm", "needs cuda; this runner is rocm"],
            ),
            (
                "cpu",
                ["test_unmarked", "test_cpu", "test_param[[]1]"],
                ["needs cuda; this runner is cpu", "needs cuda or rocm; this runner is cpu"],
            ),
        ],
    )
    def test_marked_tests_run_only_on_their_targets(
        self, guard_pytester: pytest.Pytester, target: str, passed: list[str], skips: list[str]
    ) -> None:
        guard_pytester.makepyfile(MARKED_TESTS)
        result = guard_pytester.runpytest(
            "-p", "startup_guard", f"--startup-target={target}", "--strict-markers", "-rs", "-v"
        )
        result.assert_outcomes(passed=len(passed), skipped=8 - len(passed))
        result.stdout.fnmatch_lines_random([f"*::{name} PASSED*" for name in passed])
        result.stdout.fnmatch_lines_random([f"SKIPPED [[]*]*: {reason}" for reason in skips])
        result.stdout.no_fnmatch_line("*registers its own*")

    def test_dash_m_is_still_pytest_selection(self, guard_pytester: pytest.Pytester) -> None:
        guard_pytester.makepyfile(MARKED_TESTS)
        result = guard_pytester.runpytest(
            "-p", "startup_guard", "--startup-target=cuda", "-m", "rocm", "-rs"
        )
        result.assert_outcomes(passed=1, skipped=2, deselected=5)
        result.stdout.fnmatch_lines(["SKIPPED [[]1]*: needs rocm; this runner is cuda"] * 2)

    def test_typos_still_fail_strict_markers(self, guard_pytester: pytest.Pytester) -> None:
        guard_pytester.makepyfile("import pytest\n@pytest.mark.rcom\ndef test_x():\n    pass\n")
        result = guard_pytester.runpytest("-p", "startup_guard", "--strict-markers")
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(["*'rcom' not found in `markers` configuration option*"])

    @pytest.mark.parametrize("registered_in", ["ini", "conftest"])
    def test_suite_registering_its_own_marker_keeps_it(
        self,
        guard_pytester: pytest.Pytester,
        monkeypatch: pytest.MonkeyPatch,
        machine: FakeMachine,
        registered_in: str,
    ) -> None:
        machine.become(monkeypatch)  # a cpu machine
        line = "cuda(min_memory_gb): needs a CUDA GPU with that much memory"
        if registered_in == "ini":
            guard_pytester.makeini(f"[pytest]\nmarkers =\n    {line}\n")
        else:
            guard_pytester.makeconftest(
                f"def pytest_configure(config):\n    config.addinivalue_line('markers', {line!r})\n"
            )
        guard_pytester.makepyfile(
            """
            import pytest

            @pytest.mark.cuda(min_memory_gb=16)
            def test_theirs():
                pass

            @pytest.mark.rocm
            def test_ours():
                pass

            def test_other():
                pass
            """
        )
        detected = guard_pytester.runpytest("-p", "startup_guard", "--strict-markers", "-rs")
        detected.assert_outcomes(passed=2, skipped=1, warnings=1)
        detected.stdout.fnmatch_lines(["SKIPPED [[]1]*: needs rocm; this runner is cpu"])
        message = "this suite registers its own 'cuda' marker; startup-guard leaves tests marked"
        assert detected.stdout.str().count(message) == 1
        explicit = guard_pytester.runpytest(
            "-p", "startup_guard", "--strict-markers", "-rs", "--startup-target=cpu"
        )
        explicit.assert_outcomes(passed=1, skipped=2, warnings=1)
        explicit.stdout.fnmatch_lines_random(
            [
                "SKIPPED [[]1]*: needs cuda; this runner is cpu",
                "*its own 'cuda' marker; the target was set explicitly (cpu)*",
            ]
        )

    def test_bad_marker_arguments_fail_at_collection(self, guard_pytester: pytest.Pytester) -> None:
        guard_pytester.makepyfile(
            test_bad="""
            import pytest

            @pytest.mark.cuda(42)
            def test_positional():
                pass

            @pytest.mark.rocm(memory="16G")
            def test_keyword():
                pass

            @pytest.mark.rocm
            def test_fine():
                pass
            """
        )
        result = guard_pytester.runpytest("-p", "startup_guard", "--startup-target=rocm")
        assert result.ret == pytest.ExitCode.INTERRUPTED
        result.assert_outcomes(errors=2)
        result.stdout.fnmatch_lines(
            [
                "*ERROR collecting test_bad.py*",
                "@pytest.mark.cuda(42): the target markers cpu, cuda and rocm take no arguments"
                " (unexpected argument 42); write @pytest.mark.cuda, and stack target markers*",
                "(in test_bad.py::test_positional)",
                "*ERROR collecting test_bad.py*",
                "@pytest.mark.rocm(memory='16G'): *(unknown keyword 'memory')*",
                "(in test_bad.py::test_keyword)",
                "*short test summary info*",
                "ERROR test_bad.py::test_positional - @pytest.mark.cuda(42): *",
                "ERROR test_bad.py::test_keyword - @pytest.mark.rocm(memory='16G'): *",
                "*Interrupted: 2 errors during collection*",
            ]
        )
        result.stdout.no_fnmatch_line("*test_fine*PASSED*")


# -- per-target settings -------------------------------------------------------------------

SAMPLE_VALUES = {
    "seed": "7",
    "timeout": "30",
    "report": "report.json",
    "html": "report.html",
    "artifacts": "artifacts",
    "strict_reruns": "false",
    "allow_reruns": "false",
}


class TestPerTargetSettings:
    def test_every_per_target_key_is_registered(self, guard_pytester: pytest.Pytester) -> None:
        keys = [
            f"{option.target_ini(target)} = {SAMPLE_VALUES[option.name]}"
            for option in options.OPTIONS
            if option.per_target
            for target in TARGETS
        ]
        guard_pytester.makeini("[pytest]\n" + "\n".join(keys) + "\n")
        guard_pytester.makepyfile(PASSING)
        result = guard_pytester.runpytest("-p", "startup_guard", "--strict-config")
        result.assert_outcomes(passed=1)
        assert len(keys) == 3 * sum(option.per_target for option in options.OPTIONS) >= 18

    def test_header_shows_the_per_target_settings_in_force(
        self, guard_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        guard_pytester.makeini(
            "[pytest]\n"
            "startup_guard_timeout = 30\n"
            "startup_guard_timeout_rocm = 120\n"
            "startup_guard_timeout_cuda = 45\n"
            "startup_guard_allow_reruns_rocm = true\n"
        )
        guard_pytester.makepyfile(PASSING)

        def lines(target: str) -> list[str]:
            result = guard_pytester.runpytest(
                "-p", "startup_guard", f"--startup-target={target}", "--strict-config"
            )
            return [line for line in result.outlines if line.startswith("startup-guard:")]

        rocm = lines("rocm")
        assert rocm[0].endswith("timeout=120s (startup_guard_timeout_rocm in tox.ini)")
        assert rocm[1] == (
            "startup-guard: rocm settings: timeout=120s (startup_guard_timeout_rocm in tox.ini);"
            " allow_reruns=true (startup_guard_allow_reruns_rocm in tox.ini)"
        )
        cuda = lines("cuda")
        assert cuda[0].endswith("timeout=45s (startup_guard_timeout_cuda in tox.ini)")
        assert cuda[1:] == [
            "startup-guard: cuda settings: timeout=45s (startup_guard_timeout_cuda in tox.ini)"
        ]
        cpu = lines("cpu")
        assert cpu[0].endswith("timeout=30s (startup_guard_timeout in tox.ini)")
        assert cpu[1:] == []
        monkeypatch.setenv("STARTUP_GUARD_TIMEOUT", "50")
        assert lines("rocm")[1] == (
            "startup-guard: rocm settings: startup_guard_timeout_rocm not in force"
            " (STARTUP_GUARD_TIMEOUT wins); allow_reruns=true"
            " (startup_guard_allow_reruns_rocm in tox.ini)"
        )


# -- JUnit XML -----------------------------------------------------------------------------


def junit_properties(path: Path) -> list[tuple[str, str]]:
    tree = ET.parse(path)
    return [
        (prop.attrib["name"], prop.attrib["value"])
        for prop in tree.getroot().iter("property")
        if prop.attrib["name"].startswith("startup_guard_")
    ]


class TestJunitXml:
    def test_target_is_a_test_suite_property(self, guard_pytester: pytest.Pytester) -> None:
        guard_pytester.makepyfile(TARGET_PROBE.format(target="cuda"))
        result = guard_pytester.runpytest(
            "-p", "startup_guard", "--startup-target=cuda", "--junitxml=junit.xml"
        )
        result.assert_outcomes(passed=1)
        assert junit_properties(guard_pytester.path / "junit.xml") == [
            ("startup_guard_target", "cuda"),
            ("startup_guard_target_reason", "from --startup-target"),
        ]

    def test_under_xdist_too(self, guard_pytester: pytest.Pytester) -> None:
        guard_pytester.makepyfile(MARKED_TESTS)
        result = guard_pytester.runpytest_subprocess(
            "-p", "xdist", "-n", "2", "-p", "startup_guard", "--startup-target=rocm",
            "--junitxml=junit.xml",
        )  # fmt: skip
        result.assert_outcomes(passed=5, skipped=3)
        assert junit_properties(guard_pytester.path / "junit.xml") == [
            ("startup_guard_target", "rocm"),
            ("startup_guard_target_reason", "from --startup-target"),
        ]


# -- the CI matrix example -----------------------------------------------------------------


def pytest_args(command: str) -> list[str]:
    words = shlex.split(command)
    return words[words.index("pytest") + 1 :]


class TestCiMatrix:
    def test_matrix_covers_every_target_with_the_plugins_options(
        self, guard_pytester: pytest.Pytester
    ) -> None:
        workflow = yaml.safe_load(WORKFLOW.read_text())
        job = workflow["jobs"]["pytest"]  # the matrix; "matrix-summary" merges its reports
        entries = job["strategy"]["matrix"]["include"]
        assert [entry["target"] for entry in entries] == list(TARGETS)
        assert job["strategy"]["fail-fast"] is False
        assert job["runs-on"] == "${{ matrix.runner }}"
        for entry in entries:
            self_hosted = "self-hosted" in entry["runner"]
            assert self_hosted == (entry["target"] != "cpu"), entry
            assert entry["target"] == "cpu" or entry["target"] in entry["runner"], entry
        (run,) = [step for step in job["steps"] if "--startup-target" in step.get("run", "")]
        (upload,) = [step for step in job["steps"] if "upload-artifact" in step.get("uses", "")]
        assert upload["if"] == "always()"
        flags = {option.flag for option in options.OPTIONS if option.has_flag}
        guard_pytester.makepyfile(TARGET_PROBE.replace('"{target}"', "startup_target"))
        for target in TARGETS:
            args = pytest_args(run["run"].replace("${{ matrix.target }}", target))
            assert args[:2] == ["-p", "startup_guard"]
            assert f"--startup-target={target}" in args
            report = f"--startup-guard-report=report-{target}.json"
            assert report in args
            assert {arg.split("=")[0] for arg in args if arg.startswith("--startup")} <= flags
            junit = next(arg.split("=", 1)[1] for arg in args if arg.startswith("--junitxml="))
            kept = upload["with"]["path"].replace("${{ matrix.target }}", target).split()
            assert sorted(kept) == sorted([f"report-{target}.json", junit])
            result = guard_pytester.runpytest(*args)
            result.assert_outcomes(passed=1)
            assert header(result).startswith(
                f"startup-guard: target={target} (from --startup-target)"
            )
            assert junit_properties(guard_pytester.path / junit)[0] == (
                "startup_guard_target",
                target,
            )
