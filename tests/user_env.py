"""The environment of a user's own pytest run: this suite's plugin settings and pytest's own
variables (``PYTEST_XDIST_WORKER``, ``PYTEST_ADDOPTS``, ...) left out."""

from __future__ import annotations

import os


def user_env() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("STARTUP_GUARD_", "PYTEST_"))
    }
