"""A real headless browser for the tests of the HTML views (Debian's ``chromium``).

``facts(page, script)`` renders a page as a person would see it and returns what a script
measured on it (computed styles, boxes, counts): a copy of the page gets the script appended,
and ``chromium --dump-dom`` prints the document after it ran. The shipped pages themselves carry
no script. ``screenshot(page, png)`` keeps a picture of the page. Without a browser the tests
that need one skip, saying how to install it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL = (
    "no headless browser (chromium) on this machine: install Debian's chromium"
    " (`apt-get install chromium`; .ci/run does it in CI) to check the HTML views as rendered"
)
FACTS = re.compile(r'<pre id="sg-browser-facts">(.*?)</pre>', re.DOTALL)
CSP = re.compile(r"<meta[^>]*Content-Security-Policy[^>]*>", re.IGNORECASE)


def find_browser() -> str | None:
    given = os.environ.get("CHROMIUM")
    if given:
        return given
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def browser() -> str:
    """The browser's path, or skip the test with how to install one."""
    found = find_browser()
    if found is None:
        pytest.skip(INSTALL)
    return found


def artifacts_dir() -> Path:
    """Where the tests keep what they rendered (screenshots): ``$STARTUP_GUARD_TEST_ARTIFACTS``
    or ``.test-artifacts`` at the repository's root."""
    folder = Path(os.environ.get("STARTUP_GUARD_TEST_ARTIFACTS", ROOT / ".test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _run(arguments: list[str]) -> str:
    with tempfile.TemporaryDirectory(prefix="sg-browser-") as profile:
        done = subprocess.run(
            [
                browser(),
                "--headless",
                "--no-sandbox",  # CI runs as root
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                *arguments,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        raise AssertionError(f"the browser failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def facts(page: Path, script: str, *, budget_ms: int = 3000) -> Any:
    """Render ``page`` and return the JSON value ``script`` (a function body that returns a
    value) computed on it, after the page's own scripts ran."""
    probe = (
        "<script>window.addEventListener('load', () => setTimeout(() => {"
        " const pre = document.createElement('pre'); pre.id = 'sg-browser-facts';"
        f" pre.textContent = JSON.stringify((() => {{ {script} }})());"
        " document.body.appendChild(pre); }, 200));</script>"
    )
    # The shipped pages forbid every script (a Content-Security-Policy): the copy lets the probe run.
    text = CSP.sub("", page.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="sg-page-") as folder:
        copy = Path(folder) / page.name
        copy.write_text(text + probe, encoding="utf-8")
        dom = _run([f"--virtual-time-budget={budget_ms}", "--dump-dom", copy.as_uri()])
    found = FACTS.search(dom)
    assert found, f"the probe never ran on {page} (the page did not load?)"
    import html

    return json.loads(html.unescape(found.group(1)))


def screenshot(page: Path, png: Path, size: tuple[int, int] = (1280, 1000)) -> Path:
    """A picture of ``page`` as the browser draws it, kept at ``png``."""
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(
        [
            "--hide-scrollbars",
            f"--window-size={size[0]},{size[1]}",
            "--virtual-time-budget=3000",
            f"--screenshot={png}",
            page.as_uri(),
        ]
    )
    assert png.is_file() and png.stat().st_size > 1000, f"no screenshot of {page} at {png}"
    return png
