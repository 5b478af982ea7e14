"""JSON as every reader reads it: never ``NaN`` nor ``Infinity``.

Python's ``json.dumps`` writes a float that is not finite as ``NaN``, ``Infinity`` or
``-Infinity``, which no other JSON reader accepts (a browser's ``JSON.parse``, ``jq``,
``jsonschema`` in another language); ``startup-guard-report`` refuses them too. Every JSON file
the report writes (the run's report, an artifact's facts) goes through ``dumps``: a number that
is not finite is written ``null``, what the report's schema calls a time or a figure not known,
and ``allow_nan=False`` makes sure no other path lets one through.

Standard library only: the ``startup-guard-report`` command starts without pytest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every float that is not finite, at any depth, made None (a copy where
    something changed; tuples become lists, as ``json`` writes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def dumps(
    value: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None
) -> str:
    """``value`` as strict JSON text (see the module), ending in a newline."""
    return json.dumps(finite(value), indent=indent, default=default, allow_nan=False) + "\n"


__all__ = ["dumps", "finite"]
