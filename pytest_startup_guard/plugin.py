"""The pytest-facing side of pytest-startup-guard: options, markers, fixtures, hooks.

Thin on purpose: it wires the parts (hub cache, child runtime, races, fleet, verdicts,
targets, report) into pytest and holds no logic of its own. Importing it loads the standard
library and pytest only; everything heavy is imported inside the fixture or hook that needs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_startup_guard import options
from pytest_startup_guard.hubcache import FakeHubCache
from pytest_startup_guard.hubenv import HubEnvironment
from pytest_startup_guard.session import SESSION_KEY, build_session, get_session
from pytest_startup_guard.targets import contradiction, detect_target

if TYPE_CHECKING:
    from pytest_startup_guard.controller import RuntimeController

MARKERS = (
    "cpu: run only where the start-up target is cpu (combine with cuda/rocm: any of them)",
    "cuda: run only where the start-up target is cuda (--startup-target or detected)",
    "rocm: run only where the start-up target is rocm (--startup-target or detected)",
    "startup_races(transient=[...], corrupt=[...]): run the test once per transient race and"
    " once per persistent corruption (names from RACES and CORRUPTIONS, or 'all')",
)
OWN_MARKER_SUFFIX = " [pytest-startup-guard]"


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line + OWN_MARKER_SUFFIX)
    target_setting = options.resolve(config, "target")
    detection = detect_target()
    if target_setting.value == "auto":
        target, reason = detection.target, detection.reason
    else:
        target, reason = str(target_setting.value), f"from {target_setting.source}"
    session = build_session(config, target, reason)
    if target_setting.value != "auto":
        warning = contradiction(target, detection)
        if warning:
            session.warnings.append(warning)
    config.stash[SESSION_KEY] = session
    for warning in session.warnings:
        config.issue_config_time_warning(
            pytest.PytestWarning(f"startup-guard: {warning}"), stacklevel=2
        )


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker uses the controller's run seed."""
    node.workerinput["startup_guard_seed"] = get_session(node.config).run_seed


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = get_session(config)
    timeout = session.settings["timeout"]
    return [
        f"startup-guard: target={session.target} ({session.target_reason}),"
        f" seed={session.run_seed} ({session.seed_source}),"
        f" timeout={timeout.value:g}s ({timeout.source})"
    ]


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def hub_cache(tmp_path: Any) -> Iterator[FakeHubCache]:
    """A private fake hub cache for this test, its env applied to the test process."""
    cache = FakeHubCache(tmp_path / "startup-guard-cache")
    environment = HubEnvironment(cache.env)
    environment.apply()
    try:
        yield cache
    finally:
        environment.restore()


@pytest.fixture(scope="session")
def shared_hub_cache(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> FakeHubCache:
    """One fake cache for the whole run, built once even across xdist workers.

    Read-only for tests: races and corruptions refuse its repos; take ``hub_cache.copy_of(repo)``.
    """
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if hasattr(pytestconfig, "workerinput"):
        base = base.parent  # shared by every worker of this run (the pytest-xdist recipe)
    with FileLock(str(base / "startup-guard-shared.lock")):
        return FakeHubCache(base / "startup-guard-shared", shared=True)


@pytest.fixture
def child_runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[RuntimeController]:
    """The test side of the child runtime for this test.

    While the test runs, its plan is in ``os.environ``: every Python process the test starts
    (and their descendants) reports in, is watched under ``watch()``-ed folders, and can be held
    at an access by a listener. At teardown, processes declared with ``expect(pid, label)`` that
    never reported in fail the test ("plan never reached pid N").
    """
    from pytest_startup_guard.controller import RuntimeController

    controller = RuntimeController().start()
    try:
        with monkeypatch.context() as patch:
            for key, value in controller.env.items():
                patch.setenv(key, value)
            yield controller
        problems = controller.unreached_expected() + controller.errors
    finally:
        controller.close()
    if problems:
        pytest.fail("startup-guard child runtime:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def startup_target(pytestconfig: pytest.Config) -> str:
    """The runner's target: 'cpu', 'cuda' or 'rocm'."""
    return get_session(pytestconfig).target
