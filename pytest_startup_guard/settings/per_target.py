"""The header line that says which per-target ini keys (``startup_guard_X_<target>``) are set
on this runner, and whether each is in force or what beat it."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_startup_guard.settings.options import OPTIONS, Setting


def target_settings_summary(
    config: pytest.Config, target: str, settings: Mapping[str, Setting]
) -> str | None:
    """One header line naming every per-target ini key of ``target`` that is set, and whether
    it is in force (``timeout=120s (startup_guard_timeout_rocm in tox.ini)``) or what beat it.
    None when no per-target key of ``target`` is set."""
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
