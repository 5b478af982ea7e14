"""The bug zoo's full matrix: every observed verdict matches the expected one.

Every policy of ``examples/servers/config_server.py`` x both loaders x every transient race
and every corruption, each a fleet of real servers on a fake cache (``examples/test_zoo.py``).
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from user_env import user_env

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))

from zoo import POLICIES, expected  # noqa: E402

from pytest_startup_guard import CORRUPTIONS  # noqa: E402
from pytest_startup_guard.races.catalog import races_for_all  # noqa: E402

CASE = re.compile(
    r"test_startup\[(transient|corrupt)-(\w+?)-(naive|retry|swallow|slow_retry)-(autoconfig|hub_json)\]"
)


@pytest.mark.parametrize("loader", ["autoconfig", "hub_json"])
@pytest.mark.parametrize("policy", POLICIES)
def test_every_case_of_the_zoo_gives_the_expected_verdict(
    policy: str, loader: str, tmp_path: Path
) -> None:
    junit = tmp_path / "zoo.xml"
    env = user_env()
    # One server per fleet keeps 2 cores from being swamped by transformers imports while the
    # rest of the suite runs; 10 s leaves a healthy start-up a wide margin, and is what a
    # hanging server (slow_retry on a corrupt config) costs per case.
    env["ZOO_SERVERS"] = "1"
    env["ZOO_TIMEOUT"] = "10"
    # The slow_retry server hangs on every corruption until that time-out: its cases wait, they
    # do not compute, so two of them wait at once (they made the two longest tests of the suite).
    spread = ["-p", "xdist", "-n", "2"] if policy == "slow_retry" else []
    # The transformers loader's cases fork their servers from a warm template (transformers
    # imported once per run, not once per case: the suite's longest tests); the hub_json ones
    # start cold. tests/test_warm_verdicts.py holds the two ways to the same verdicts.
    warm = ["--startup-guard-warm=on"] if loader == "autoconfig" else []
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "startup_guard",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--basetemp={tmp_path / 'tmp'}",
            f"--junitxml={junit}",
            "-o",
            "junit_family=legacy",
            str(EXAMPLES / "test_zoo.py"),
            "-k",
            f"{policy}-{loader} and not slow_{policy}",
            *spread,
            *warm,
        ],
        cwd=EXAMPLES,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    observed: dict[tuple[str, str, str], str] = {}
    messages: dict[tuple[str, str, str], str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        match = CASE.search(case.get("name", ""))
        assert match, case.get("name")
        kind, name, case_policy, case_loader = match.groups()
        assert (case_policy, case_loader) == (policy, loader)
        failure = case.find("failure")
        error = case.find("error")
        assert error is None, (
            f"{case.get('name')}: {error.get('message') if error is not None else ''}"
        )
        observed[(kind, name, loader)] = "fail" if failure is not None else "pass"
        messages[(kind, name, loader)] = (failure.text or "") if failure is not None else ""
    transient = set(races_for_all()) | {"snapshot_resync"}  # the examples' conftest adds its race
    expected_cases = {
        (kind, name, loader)
        for kind, names in (("transient", transient), ("corrupt", CORRUPTIONS))
        for name in names
    }
    assert set(observed) == expected_cases, completed.stdout[-3000:]
    wrong = {
        case: verdict for case, verdict in observed.items() if verdict != expected(policy, case[0])
    }
    assert not wrong, "\n\n".join(
        f"{case}: observed {verdict}\n{messages[case][-1500:]}" for case, verdict in wrong.items()
    )
    # the failures say why, in the words of the verdict
    reasons = {
        ("naive", "transient"): "did not survive the race",
        ("swallow", "transient"): "came up on the wrong config",
        ("swallow", "corrupt"): "it hid the corruption",
        ("slow_retry", "corrupt"): "hanging is failing",
    }
    for (kind, _name, _loader), message in messages.items():
        if (policy, kind) in reasons:
            assert reasons[(policy, kind)] in message
            assert "replay: pytest -p startup_guard --startup-guard-seed=" in message
