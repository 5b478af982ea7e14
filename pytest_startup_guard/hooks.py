"""Hooks the plugin offers to conftest files and other plugins."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_startup_guard.races.catalog import Race


@pytest.hookspec
def pytest_startup_guard_races() -> Mapping[str, type[Race]] | Iterable[type[Race]] | None:
    """Return races to register: a mapping of name to ``Race`` subclass, or subclasses with a
    ``name``. They become known to ``hub_race.arm`` and the ``startup_races`` marker."""
