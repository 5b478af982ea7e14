"""Which accelerator a runner has (cpu, cuda or rocm), and which target a run uses.

Detection decides without importing torch and without running any program: ``detect_target``
is a pure function of a root folder, an environment, a PATH and the modules already imported,
so tests can fake every kind of machine. Importing this module loads the standard library only
(pytest is imported inside the functions that take pytest objects), so a CI script can ask
``python -c "from pytest_startup_guard import detect_target; print(detect_target().target)"``.

The marker semantics live in ``markers.py``, the JUnit property in ``junit.py``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
    _check_arguments(root, environ, path, modules)
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


def _check_arguments(root: object, environ: object, path: object, modules: object) -> None:
    """A fake machine that is not there would be detected as a quiet cpu runner: refuse it."""
    from pytest_startup_guard.checks import folder, instance, shown
    from pytest_startup_guard.errors import ArgumentTypeError

    where = "detect_target()"
    if root is not None:
        folder("root", root, where)
    for name, value, what in (
        ("environ", environ, "a mapping of variable name to value"),
        ("modules", modules, "a mapping of module name to module"),
    ):
        if value is not None and not isinstance(value, Mapping):
            raise ArgumentTypeError(f"invalid {name}={shown(value)} for {where}: expected {what}")
    if path is not None:
        instance("path", path, str, where, "a PATH string (folders joined by os.pathsep)")


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


def choose_target(value: str, source: str, detection: Detection) -> TargetChoice:
    """The run's target from the resolved ``target`` setting (its value and where it came from:
    ``--startup-target``, ``default``...) and what the machine shows."""
    if value == "auto":
        warnings_: tuple[str, ...] = ()
        if detection.ambiguous:
            warnings_ = (
                f"target detection is ambiguous: chose {detection.target} ({detection.reason});"
                " set --startup-target, STARTUP_GUARD_TARGET or startup_guard_target",
            )
        reason = detection.reason
        if source != "default":
            reason += f"; auto from {source}"
        return TargetChoice(detection.target, reason, explicit=False, warnings=warnings_)
    warning = contradiction(value, source, detection)
    return TargetChoice(
        value, f"from {source}", explicit=True, warnings=(warning,) if warning else ()
    )
