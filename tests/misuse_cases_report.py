"""Misuses of ``startup-guard-report`` with files that are not what the plugin wrote (issue 42:
everything read is validated): read by misuse_cases.py. ``write_report_files`` puts the files
they name in a case's folder, under ``EDITED`` (``test_misuse.make_scratch_files`` calls it),
which ``report_schema.reports_under`` leaves out: they break the schema on purpose."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from misuse_cases import Misuse, _cli
from report_schema import EDITED


def valid_report() -> dict[str, Any]:
    """The smallest report of version 5 that holds to the schema: no test at all."""
    names = ("pytest-startup-guard", "pytest", "python", "pytest-rerunfailures")
    names += ("pytest-xdist", "huggingface_hub", "transformers")
    totals = ("tests", "passed", "failed", "error", "skipped", "xfailed", "xpassed")
    return {
        "schema": "pytest-startup-guard-report",
        "version": 5,
        "created": "2026-01-01T00:00:00Z",
        "target": "cpu",
        "target_reason": "the default",
        "seed": 1,
        "seed_source": "--startup-guard-seed",
        "versions": dict.fromkeys(names, "1.0"),
        "workers": 0,
        "exit_status": 0,
        "strict_reruns": False,
        "allow_reruns": False,
        "totals": dict.fromkeys((*totals, "hidden_by_reruns", "absorbed_servers"), 0),
        "tests": [],
    }


def write_report_files(folder: Path) -> None:
    """The broken reports the cases below name, and a FIFO nobody writes into."""
    folder = folder / EDITED
    folder.mkdir(exist_ok=True)
    report = valid_report()
    broken: dict[str, Any] = {
        "totals_text.json": {**report, "totals": {**report["totals"], "tests": "5"}},
        "test_a_string.json": {**report, "tests": ["test_x"]},
        "tests_left_out.json": {key: value for key, value in report.items() if key != "tests"},
        "extra_field.json": {**report, "comment": "added by hand"},
    }
    for name, document in broken.items():
        (folder / name).write_text(json.dumps(document))
    (folder / "nan.json").write_text(json.dumps({**report, "seed": 1.5}).replace("1.5", "NaN"))
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    if hasattr(os, "mkfifo") and not (folder / "fifo.json").exists():
        os.mkfifo(folder / "fifo.json")


CASES: list[Misuse] = [
    _cli(
        "merge_report_fifo",
        "merge hand_edited/fifo.json",
        "hand_edited/fifo.json",
        "FIFO",
        "not a file",
    ),
    _cli("merge_report_device", "merge /dev/null", "/dev/null", "character device"),
    _cli(
        "merge_report_field_type",
        "merge hand_edited/totals_text.json",
        "hand_edited/totals_text.json",
        "field /totals/tests",
        'expected an integer >= 0, found "5"',
    ),
    _cli(
        "merge_report_test_not_object",
        "merge hand_edited/test_a_string.json",
        "hand_edited/test_a_string.json",
        "field /tests/0",
        "expected an object",
    ),
    _cli(
        "merge_report_field_missing",
        "merge hand_edited/tests_left_out.json",
        "hand_edited/tests_left_out.json",
        "field /tests: missing",
    ),
    _cli(
        "merge_report_field_unknown",
        "merge hand_edited/extra_field.json",
        "hand_edited/extra_field.json",
        "field /comment",
        "not a field",
    ),
    _cli(
        "merge_report_nan",
        "merge hand_edited/nan.json",
        "hand_edited/nan.json",
        "not strict JSON",
        "NaN",
    ),
    _cli(
        "merge_report_too_deep",
        "merge hand_edited/deep.json",
        "hand_edited/deep.json",
        "nested deeper than",
    ),
]
