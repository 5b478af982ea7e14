"""Members forked from a warm template get the verdicts members started cold get.

The demo's bug zoo (four server policies against its races and corruptions, in stress rounds)
and the examples' explorations are run as a user runs them, once cold and once with
``--startup-guard-warm=on``: every test must end the same way, and every exploration point too.
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from user_env import user_env

EXAMPLES = Path(__file__).parent.parent / "examples"
# The demo's zoo rows (examples/run_demo.py ZOO_CASES) of one race and one corruption: each
# policy in two stress rounds (the other rows differ in the race or corruption, not the fork).
ZOO_CASES = "autoconfig and (transient-pointer_swap or corrupt-empty-)"
FORKED = "forked from warm template"


def _outcomes(junit: Path) -> dict[str, str]:
    """Each test's outcome, and the points its exploration recorded (launches left out)."""
    outcomes = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        words = "failed" if failed else "skipped" if skipped else "passed"
        for prop in case.iter("property"):
            if prop.get("name") == "caught":
                words += ": " + re.sub(r" in \d+ launch\(es\)", "", prop.get("value", ""))
        outcomes[case.get("name", "")] = words
    return outcomes


def _run(tmp_path: Path, name: str, *args: str) -> tuple[dict[str, str], str]:
    junit = tmp_path / f"{name}.xml"
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "no:cacheprovider",
         f"--basetemp={tmp_path / name}", f"--junitxml={junit}", "--startup-guard-seed=7",
         *args],
        cwd=EXAMPLES, env=user_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert completed.returncode in (0, 1), completed.stdout[-4000:] + completed.stderr[-2000:]
    return _outcomes(junit), completed.stdout


@pytest.mark.parametrize(
    "what",
    [
        pytest.param(("test_zoo.py", "-k", ZOO_CASES, "--startup-guard-stress=2"), id="zoo"),
        pytest.param(("test_explore.py",), id="explorations"),
    ],
)
def test_cold_and_warm_members_get_the_same_verdicts(tmp_path: Path, what: tuple[str, ...]) -> None:
    cold, cold_output = _run(tmp_path, "cold", *what)
    warm, warm_output = _run(tmp_path, "warm", *what, "--startup-guard-warm=on")
    assert len(cold) >= 4, cold
    assert "failed" in " ".join(cold.values())  # the zoo's broken servers, the naive explorer
    assert FORKED not in cold_output
    if what[0] == "test_zoo.py":  # a failing test's fleet summary says how its members started
        assert FORKED in warm_output
    assert warm == cold
