"""Which accelerator a runner has: cpu, cuda or rocm, decided without torch or running programs.

``detect_target`` is a pure function of a root folder, an environment and a PATH, so tests can
fake every kind of machine. Where torch is already imported, its build may confirm the answer.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

TARGETS = ("cpu", "cuda", "rocm")


@dataclass(frozen=True)
class Detection:
    target: str
    reason: str  # "from /dev/kfd", "no GPU signal"
    signals: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # target -> evidence


def _exists(root: str, path: str) -> bool:
    return os.path.exists(os.path.join(root, path.lstrip("/")))


def _set(environ: Mapping[str, str], name: str) -> bool:
    value = environ.get(name)
    return value is not None and value.strip() not in ("", "-1")


def gather_signals(
    root: str = "/", environ: Mapping[str, str] | None = None, path: str | None = None
) -> dict[str, tuple[str, ...]]:
    """Evidence for each GPU target, strongest first (device files, then installs, then env)."""
    environ = os.environ if environ is None else environ
    search_path = environ.get("PATH", "") if path is None else path

    def on_path(program: str) -> bool:
        return shutil.which(program, path=search_path) is not None

    rocm: list[str] = []
    if _exists(root, "/dev/kfd"):
        rocm.append("/dev/kfd")
    rocm_home = environ.get("ROCM_PATH") or environ.get("ROCM_HOME") or "/opt/rocm"
    if _exists(root, os.path.join(rocm_home, "bin")) or _exists(
        root, os.path.join(rocm_home, ".info/version")
    ):
        rocm.append(f"ROCm install at {rocm_home}")
    rocm.extend(f"{program} on PATH" for program in ("rocminfo", "rocm-smi") if on_path(program))
    rocm.extend(
        name for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES") if _set(environ, name)
    )

    cuda: list[str] = []
    cuda.extend(p for p in ("/dev/nvidiactl", "/proc/driver/nvidia/version") if _exists(root, p))
    if on_path("nvidia-smi"):
        cuda.append("nvidia-smi on PATH")
    return {"rocm": tuple(rocm), "cuda": tuple(cuda)}


def _torch_build() -> str | None:
    torch = sys.modules.get("torch")  # never imported here: too heavy, and not ours to import
    version = getattr(torch, "version", None)
    if version is None:
        return None
    if getattr(version, "hip", None):
        return "rocm"
    if getattr(version, "cuda", None):
        return "cuda"
    return "cpu"


def detect_target(
    root: str = "/",
    environ: Mapping[str, str] | None = None,
    path: str | None = None,
    torch_build: str | None = None,
) -> Detection:
    """Decide cpu/cuda/rocm. Device files outrank installs and variables; torch breaks ties."""
    signals = gather_signals(root, environ, path)
    torch_build = _torch_build() if torch_build is None else torch_build
    rocm, cuda = signals["rocm"], signals["cuda"]
    device = {
        "rocm": "/dev/kfd" in rocm,
        "cuda": any(s.startswith(("/dev/", "/proc/")) for s in cuda),
    }
    if device["rocm"] != device["cuda"]:
        target = "rocm" if device["rocm"] else "cuda"
    elif rocm and not cuda:
        target = "rocm"
    elif cuda and not rocm:
        target = "cuda"
    elif rocm and cuda:
        target = (
            torch_build
            if torch_build in ("rocm", "cuda")
            else ("rocm" if len(rocm) >= len(cuda) else "cuda")
        )
    else:
        return Detection("cpu", "no GPU signal", signals)
    evidence = signals[target]
    reason = f"from {evidence[0]}"
    if torch_build == target:
        reason += ", confirmed by torch"
    other = "cuda" if target == "rocm" else "rocm"
    if signals[other]:
        reason += f"; also saw {other} signs: {', '.join(signals[other])}"
    return Detection(target, reason, signals)


def contradiction(forced: str, detection: Detection) -> str | None:
    """A warning when a forced GPU target is not what the machine shows (cpu is always allowed)."""
    if forced == "cpu" or forced == detection.target:
        return None
    shows = detection.target if detection.target != "cpu" else "no GPU"
    evidence = f" ({detection.reason})"
    return f"--startup-target={forced} was forced, but this machine shows {shows}{evidence}"
