"""Released huggingface_hub versions the tests run next to the installed one.

``make test`` installs each of ``HUB_RELEASES`` (Makefile) into ``.venv/hub-releases/<version>``
with its dependencies. A process runs that release by putting its folder first on
``PYTHONPATH``: the interpreter, and so the child runtime's ``.pth`` line, stay this venv's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RELEASES = Path(sys.prefix) / "hub-releases"


def release_folder(version: str) -> Path:
    """The folder of that release; the test skips (saying how to install it) where it is missing."""
    folder = RELEASES / version
    if not (folder / "huggingface_hub" / "__init__.py").is_file():
        pytest.skip(
            f"huggingface_hub {version} is not installed in {folder}: `make test` installs it"
        )
    return folder


def release_env(version: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (``os.environ`` by default) with that release first on ``PYTHONPATH``."""
    env = dict(os.environ if environ is None else environ)
    folder = str(release_folder(version))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (folder, env.get("PYTHONPATH", "")) if p)
    return env
