"""Which accelerator a runner has (cpu, cuda or rocm), and what the target markers mean there.

Detection decides without importing torch and without running any program: ``detect_target``
is a pure function of a root folder, an environment, a PATH and the modules already imported,
so tests can fake every kind of machine. Importing this module loads the standard library only
(pytest is imported inside the functions that take pytest objects), so a CI script can ask
``python -c "from pytest_startup_guard import detect_target; print(detect_target().target)"``.

Marker semantics (``@pytest.mark.cpu``, ``cuda``, ``rocm``): a marked test runs only where the
target is among its marks and is skipped elsewhere with a reason naming both; unmarked tests run
everywhere; marker arguments are an error at collection. Where the suite registers a target
marker of its own, the plugin warns and leaves tests carrying it alone unless the target was set
explicitly (command line, environment or ini key).
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

    from pytest_startup_guard.options import Setting

TARGETS = ("cpu", "cuda", "rocm")

MACHINE_ROOT = "/"
"""The folder detection treats as ``/`` when no root is given. The plugin's own tests point it
at a fake machine (a folder holding ``dev/kfd`` and the like); nothing else should change it."""

# How much a signal says about the hardware: a device node or driver file beats an installed
# stack (it may sit on a build machine without a GPU), which beats a variable someone exported.
DEVICE, INSTALL, ENVIRONMENT = 3, 2, 1

ROCM_DEVICE_FILES = ("/dev/kfd",)
CUDA_DEVICE_FILES = ("/dev/nvidiactl", "/proc/driver/nvidia/version")
ROCM_PROGRAMS = ("rocminfo", "rocm-smi")
CUDA_PROGRAMS = ("nvidia-smi",)
ROCM_VARIABLES = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
ROCM_HOME_VARIABLES = ("ROCM_PATH", "ROCM_HOME")
DEFAULT_ROCM_HOME = "/opt/rocm"

JUNIT_PROPERTIES = ("startup_guard_target", "startup_guard_target_reason")


@dataclass(frozen=True)
class Signal:
    """One piece of evidence for a GPU target, as the header names it."""

    target: str  # "cuda" or "rocm"
    evidence: str  # "/dev/kfd", "nvidia-smi on PATH", "HIP_VISIBLE_DEVICES=0"
    strength: int  # DEVICE, INSTALL or ENVIRONMENT


@dataclass(frozen=True)
class Detection:
    """What ``detect_target`` decided, why, and everything it saw."""

    target: str
    reason: str  # "from /dev/kfd", "no GPU signal", "from /dev/kfd; also saw cuda signs: ..."
    signals: tuple[Signal, ...] = ()
    torch_build: str | None = None  # "cpu", "cuda", "rocm" for an imported torch, else None
    # GPU signals of equal strength for two targets, and no imported torch to break the tie:
    ambiguous: bool = False

    def evidence(self, target: str) -> tuple[str, ...]:
        return tuple(signal.evidence for signal in self.signals if signal.target == target)


@dataclass(frozen=True)
class TargetChoice:
    """The target a run uses: detected (``auto``) or set by the command line, env or ini key."""

    target: str
    reason: str  # shown in the header: "from /dev/kfd", "from --startup-target"
    explicit: bool
    warnings: tuple[str, ...] = ()


# -- detection -----------------------------------------------------------------------------


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _rocm_install(root: str, environ: Mapping[str, str]) -> str | None:
    homes = [environ[name] for name in ROCM_HOME_VARIABLES if environ.get(name, "").strip()]
    for home in [*homes, DEFAULT_ROCM_HOME]:
        if os.path.isdir(_under(root, os.path.join(home, "bin"))) or os.path.isfile(
            _under(root, os.path.join(home, ".info", "version"))
        ):
            return home
    return None


def gather_signals(
    root: str | None = None, environ: Mapping[str, str] | None = None, path: str | None = None
) -> tuple[Signal, ...]:
    """Every GPU signal on the machine under ``root``, strongest kind first.

    ``path`` defaults to ``environ["PATH"]``; a missing or empty PATH finds no program.
    """
    root = MACHINE_ROOT if root is None else root
    environ = os.environ if environ is None else environ
    search_path = environ.get("PATH", "") if path is None else path
    signals: list[Signal] = []
    for target, files in (("rocm", ROCM_DEVICE_FILES), ("cuda", CUDA_DEVICE_FILES)):
        signals.extend(
            Signal(target, file, DEVICE) for file in files if os.path.exists(_under(root, file))
        )
    rocm_home = _rocm_install(root, environ)
    if rocm_home is not None:
        signals.append(Signal("rocm", f"ROCm install at {rocm_home}", INSTALL))
    for target, programs in (("rocm", ROCM_PROGRAMS), ("cuda", CUDA_PROGRAMS)):
        signals.extend(
            Signal(target, f"{program} on PATH", INSTALL)
            for program in programs
            if search_path and shutil.which(program, path=search_path) is not None
        )
    signals.extend(
        Signal("rocm", f"{name}={environ[name]}", ENVIRONMENT)
        for name in ROCM_VARIABLES
        if environ.get(name, "").strip()
    )
    return tuple(signals)


def torch_build(modules: Mapping[str, object] | None = None) -> str | None:
    """The build of an already imported torch ("cpu", "cuda" or "rocm"); never imports it."""
    modules = sys.modules if modules is None else modules
    version = modules.get("torch.version")  # not torch itself: its __getattr__ imports lazily
    if version is None:
        return None
    if getattr(version, "hip", None):
        return "rocm"
    if getattr(version, "cuda", None):
        return "cuda"
    return "cpu"


def detect_target(
    root: str | None = None,
    environ: Mapping[str, str] | None = None,
    path: str | None = None,
    modules: Mapping[str, object] | None = None,
) -> Detection:
    """Decide cpu, cuda or rocm for the machine under ``root`` (default: this one).

    The target whose strongest signal is strongest wins (device files > installs and tools on
    PATH > variables); an already imported torch breaks a tie and confirms, but never decides
    alone (CUDA builds of torch are installed on CPU machines all the time). A tie that nothing
    breaks picks the target with more evidence, then rocm, and is marked ``ambiguous``.
    """
    signals = gather_signals(root, environ, path)
    build = torch_build(modules)
    if not signals:
        return Detection("cpu", "no GPU signal", signals, build)
    strongest = max(signal.strength for signal in signals)
    leaders = [t for t in TARGETS if any(s.strength == strongest for s in _of(signals, t))]
    ambiguous = False
    if len(leaders) == 1:
        target = leaders[0]
    elif build in leaders:
        target = str(build)
    else:
        target = max(leaders, key=lambda t: (len(_of(signals, t)), t == "rocm"))
        ambiguous = True
    best = next(s for s in _of(signals, target) if s.strength == strongest)
    reason = f"from {best.evidence}"
    if build == target:
        reason += ", confirmed by torch" if len(leaders) == 1 else " and torch's build"
    others = [s.evidence for s in signals if s.target != target]
    if others:
        other = "cuda" if target == "rocm" else "rocm"
        kind = "equally strong " if ambiguous else ""
        reason += f"; also saw {kind}{other} signs: {', '.join(others)}"
    return Detection(target, reason, signals, build, ambiguous)


def _of(signals: Iterable[Signal], target: str) -> list[Signal]:
    return [signal for signal in signals if signal.target == target]


def contradiction(forced: str, source: str, detection: Detection) -> str | None:
    """A warning when a set GPU target is not what the machine shows (cpu is always allowed)."""
    if forced in ("cpu", detection.target):
        return None
    shows = (
        "no GPU signal" if detection.target == "cpu" else f"{detection.target} ({detection.reason})"
    )
    return (
        f"target {forced} was set by {source}, but this machine shows {shows};"
        f" tests marked {forced} will run here anyway"
    )


def choose_target(setting: Setting, detection: Detection) -> TargetChoice:
    """The run's target from the resolved ``target`` setting and what the machine shows."""
    if setting.value == "auto":
        warnings_: tuple[str, ...] = ()
        if detection.ambiguous:
            warnings_ = (
                f"target detection is ambiguous: chose {detection.target} ({detection.reason});"
                " set --startup-target, STARTUP_GUARD_TARGET or startup_guard_target",
            )
        reason = detection.reason
        if setting.source != "default":
            reason += f"; auto from {setting.source}"
        return TargetChoice(detection.target, reason, explicit=False, warnings=warnings_)
    target = str(setting.value)
    warning = contradiction(target, setting.source, detection)
    return TargetChoice(
        target, f"from {setting.source}", explicit=True, warnings=(warning,) if warning else ()
    )


# -- markers -------------------------------------------------------------------------------


def registered_elsewhere(marker_lines: Iterable[str], own_suffix: str) -> frozenset[str]:
    """Target markers that the suite itself (its ini file, a conftest, another plugin) registers.

    The plugin's own ``markers`` lines end with ``own_suffix``; any other line naming cpu, cuda
    or rocm is someone else's registration (parsed as pytest does: the name before ``:``/``(``).
    """
    suffix = own_suffix.strip()
    names = {
        line.split(":", 1)[0].split("(", 1)[0].strip()
        for line in marker_lines
        if not line.rstrip().endswith(suffix)
    }
    return frozenset(names & set(TARGETS))


def skip_reason(needed: Iterable[str], target: str) -> str:
    """``needs rocm; this runner is cuda`` / ``needs cuda or rocm; this runner is cpu``."""
    names = [name for name in TARGETS if name in set(needed)]
    return f"needs {' or '.join(names)}; this runner is {target}"


def marker_argument_problem(mark: pytest.Mark) -> str | None:
    """Why a target mark's arguments are wrong (they take none), or None when it has none."""
    if not mark.args and not mark.kwargs:
        return None
    written = ", ".join(
        [repr(arg) for arg in mark.args]
        + [f"{key}={value!r}" for key, value in mark.kwargs.items()]
    )
    found = [f"unexpected argument {arg!r}" for arg in mark.args]
    found += [f"unknown keyword {key!r}" for key in mark.kwargs]
    return (
        f"@pytest.mark.{mark.name}({written}): the target markers cpu, cuda and rocm take no"
        f" arguments ({', '.join(found)}); write @pytest.mark.{mark.name}, and stack target"
        " markers for a test that runs on several targets"
    )


def select_by_target(
    config: pytest.Config,
    items: list[pytest.Item],
    target: str,
    *,
    explicit: bool,
    own_suffix: str,
) -> None:
    """Apply the target markers to collected ``items`` (in place).

    A test whose target marks do not include ``target`` gets a skip mark naming both; a test
    whose target marks carry arguments becomes a collection error and is removed. Target
    markers the suite registers itself are left to the suite (never validated; tests carrying
    one are not skipped unless the target is ``explicit``), with one warning per run.
    """
    import pytest

    theirs = registered_elsewhere(config.getini("markers"), own_suffix)
    if theirs:
        warnings.warn(
            pytest.PytestConfigWarning(_theirs_message(theirs, target, explicit)), stacklevel=2
        )
    kept: list[pytest.Item] = []
    for item in items:
        marks = [mark for mark in item.iter_markers() if mark.name in TARGETS]
        problems = [
            problem
            for mark in marks
            if mark.name not in theirs
            for problem in [marker_argument_problem(mark)]
            if problem is not None
        ]
        if problems:
            report = pytest.CollectReport(
                item.nodeid, "failed", longrepr=_collection_error(item, problems), result=[]
            )
            item.ihook.pytest_collectreport(report=report)
            continue
        kept.append(item)
        needed = {mark.name for mark in marks}
        if not needed or target in needed or (needed & theirs and not explicit):
            continue
        item.add_marker(pytest.mark.skip(reason=skip_reason(needed, target)))
    items[:] = kept


def _collection_error(item: pytest.Item, problems: list[str]) -> str:
    # The node id makes each report distinct: pytest-xdist shows one per distinct text.
    return "\n".join([*dict.fromkeys(problems), f"(in {item.nodeid})"])


def _theirs_message(theirs: frozenset[str], target: str, explicit: bool) -> str:
    names = [name for name in TARGETS if name in theirs]
    listed = " and ".join(repr(name) for name in names)
    marked = " or ".join(names)
    own = f"this suite registers its own {listed} marker{'s' if len(names) > 1 else ''}"
    if explicit:
        return (
            f"startup-guard: {own}; the target was set explicitly ({target}), so startup-guard"
            f" also skips tests marked {marked} where {target} is not among their target marks"
        )
    return (
        f"startup-guard: {own}; startup-guard leaves tests marked {marked} alone. Set the"
        " target (--startup-target, STARTUP_GUARD_TARGET or startup_guard_target) to have it"
        " skip them by target"
    )


# -- per-target settings and reporting -----------------------------------------------------


def target_settings_summary(
    config: pytest.Config, target: str, settings: Mapping[str, Setting]
) -> str | None:
    """One header line naming every per-target ini key of ``target`` that is set, and whether
    it is in force (``timeout=120s (startup_guard_timeout_rocm in tox.ini)``) or what beat it.
    None when no per-target key of ``target`` is set."""
    from pytest_startup_guard.options import OPTIONS

    parts: list[str] = []
    for option in OPTIONS:
        if not option.per_target or option.name not in settings:
            continue
        key = option.target_ini(target)
        raw = config.getini(key)
        if not (isinstance(raw, str) and raw.strip()):
            continue
        setting = settings[option.name]
        if setting.source.startswith(f"{key} in "):
            parts.append(f"{option.name}={_shown(option.name, setting.value)} ({setting.source})")
        else:
            parts.append(f"{key} not in force ({setting.source} wins)")
    if not parts:
        return None
    return f"startup-guard: {target} settings: {'; '.join(parts)}"


def _shown(name: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}s" if name == "timeout" else f"{value:g}"
    return str(value)


def record_in_junit_xml(config: pytest.Config, choice: TargetChoice) -> bool:
    """Add the target as test-suite properties of the JUnit XML this process writes, if any.

    Only the process that writes the XML holds pytest's ``LogXML`` (the xdist controller, not
    its workers), which is why the ``record_testsuite_property`` fixture does not work under
    xdist (pytest issue 7767). pytest has no public way to reach that object outside a test, so
    this uses the stash key its own ``record_testsuite_property`` uses. Returns whether it did.
    """
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest that moved it: leave the XML without the property
        return False
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return False
    for name, value in zip(JUNIT_PROPERTIES, (choice.target, choice.reason), strict=True):
        xml.add_global_property(name, value)
    return True
