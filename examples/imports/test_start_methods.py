"""Start methods and an environment variable's documented choices: code that passes and code
that fails as the incident did (docs/imports.md): ``multiprocessing.set_start_method(...)``
called where a start method may already be set, and a variable documented as ``spawn`` or
``fork`` whose code still took ``forkserver``.

Run: ``pytest -p startup_guard examples/imports -v``. The ``xfail`` tests are the failing
examples; add ``--runxfail`` to see the report each check prints.
"""

from __future__ import annotations

import pytest

from pytest_startup_guard import StartMethodChecker

FAILS = pytest.mark.xfail(raises=AssertionError, strict=True, reason="a failing example")
DOCUMENTED = ["spawn", "fork"]  # ACME_START_METHOD's documented values
UNDOCUMENTED = ["forkserver", "bogus"]


def test_good_start_up_starts_under_every_start_method(start_methods: StartMethodChecker) -> None:
    start_methods.check("acme_server.good_multiproc:main").assert_safe()


@FAILS
def test_unguarded_set_start_method(start_methods: StartMethodChecker) -> None:
    # "already set (spawn)": RuntimeError: context has already been set
    start_methods.check("acme_server.bad_multiproc:main").assert_safe()


@FAILS
def test_start_up_that_needs_fork(start_methods: StartMethodChecker) -> None:
    # "default spawn", "default forkserver": Can't pickle local object 'main.<locals>.child'
    start_methods.check("acme_server.fork_only:main").assert_safe()


def test_good_variable_matches_its_documentation(start_methods: StartMethodChecker) -> None:
    start_methods.env_choices(
        "acme_server.good_multiproc:main", "ACME_START_METHOD", DOCUMENTED, unlisted=UNDOCUMENTED
    ).assert_agree()


@FAILS
def test_variable_that_still_takes_forkserver(start_methods: StartMethodChecker) -> None:
    # 'forkserver' is accepted silently; 'bogus' dies in multiprocessing without naming it.
    start_methods.env_choices(
        "acme_server.bad_multiproc:main", "ACME_START_METHOD", DOCUMENTED, unlisted=UNDOCUMENTED
    ).assert_agree()
