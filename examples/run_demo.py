"""``make demo``: run the bundled examples with the plugin and print what it caught.

Exits non-zero only when an example's outcome differs from what it expects.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = ["test_fake_cache.py"]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="startup-guard-demo-") as workdir:
        junit = Path(workdir) / "junit.xml"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "startup_guard",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            "-o",
            "junit_family=legacy",
            f"--basetemp={workdir}/tmp",
            *EXAMPLES,
        ]
        print("$", " ".join(command[2:]), flush=True)
        completed = subprocess.run(command, cwd=HERE, check=False)
        rows = []
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome = "passed"
            for tag in ("failure", "error", "skipped"):
                if case.find(tag) is not None:
                    outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
            caught = {p.get("name"): p.get("value") for p in case.iter("property")}.get(
                "caught", ""
            )
            rows.append((case.get("name", ""), outcome, caught or ""))
    print()
    print(f"{'example':<48} {'outcome':<8} what the real loader raised")
    for name, outcome, caught in rows:
        print(f"{name:<48} {outcome:<8} {caught}")
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main())
