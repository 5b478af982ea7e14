"""Imports from a background thread: the probe and the static scan, on code that passes and code
that fails as the incident did (docs/imports.md): ``transformers`` imported in a background
thread under ``suppress(Exception)`` while the main thread ran ``from transformers import
GenerationConfig``, which then failed with ``ImportError``.

Run: ``pytest -p startup_guard examples/imports -v``. The ``xfail`` tests are the failing
examples; add ``--runxfail`` to see the report each check prints.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_startup_guard import ImportRaceProbe, scan_background_imports

APP = Path(__file__).parent / "acme_server"
FAILS = pytest.mark.xfail(raises=AssertionError, strict=True, reason="a failing example")


def test_plain_library_is_safe_to_import_from_a_thread(import_race: ImportRaceProbe) -> None:
    import_race("plain_lib", attrs=("AutoThing",)).assert_safe()


@FAILS
def test_lazy_swap_library_is_not(import_race: ImportRaceProbe) -> None:
    # The main thread gets "ImportError: cannot import name 'AutoThing'", the background
    # thread an AttributeError that suppress(Exception) swallows.
    import_race("lazy_swap_lib", attrs=("AutoThing",)).assert_safe()


@FAILS
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
def test_transformers_is_not_either(import_race: ImportRaceProbe) -> None:
    # The incident itself, in one call.
    import_race("transformers", attrs=("GenerationConfig", "PretrainedConfig")).assert_safe()


def test_good_warmup_imports_nothing_in_its_thread() -> None:
    scan_background_imports(APP / "good_warmup.py").assert_clean()


@FAILS
def test_bad_warmup_imports_in_a_thread_under_suppress() -> None:
    scan_background_imports(APP / "bad_warmup.py").assert_clean()


def test_the_scan_reports_each_pattern_of_the_package() -> None:
    report = scan_background_imports(APP)
    guards = sorted({finding.guard or "unguarded" for finding in report.findings})
    assert guards == ["bare except", "except Exception", "suppress(Exception)", "unguarded"]
    assert {finding.path.rsplit("/", 1)[-1] for finding in report.errors} == {
        "bad_warmup.py",
        "workers.py",
    }
