"""The pytest-facing side of pytest-startup-guard: options, markers, fixtures, hooks.

Thin on purpose: it wires the parts (hub cache, child runtime, races, fleet, verdicts,
targets, report) into pytest and holds no logic of its own. Importing it loads the standard
library and pytest only; everything heavy is imported inside the fixture or hook that needs it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_startup_guard.errors import StartupGuardError, without_own_frames
from pytest_startup_guard.fleet import timeouts
from pytest_startup_guard.lifetimes import end_lifetime
from pytest_startup_guard.report.record import STARTUP_TEST_FIXTURES, is_startup_test
from pytest_startup_guard.settings import options
from pytest_startup_guard.settings.session import SESSION_KEY, build_session, get_session
from pytest_startup_guard.targets import junit, markers
from pytest_startup_guard.targets.detection import TargetChoice, choose_target, detect_target

if TYPE_CHECKING:
    from pytest_startup_guard.cache.hubcache import FakeHubCache
    from pytest_startup_guard.fleet.explore.writer import WriterSettings
    from pytest_startup_guard.fleet.reaper import Reaper
    from pytest_startup_guard.fleet.server_fleet import ServerFleet
    from pytest_startup_guard.fleet.warm.templates import WarmTemplates
    from pytest_startup_guard.races.exploration import ExploreSettings
    from pytest_startup_guard.races.hubrace import HubRace
    from pytest_startup_guard.remote.hub_remote import HubRemote
    from pytest_startup_guard.report.run_report import ReportPaths
    from pytest_startup_guard.runtime.controller import RuntimeController
    from pytest_startup_guard.verdicts.cases import StartupCase

CALL_FAILED_KEY = pytest.StashKey[bool]()

# A failure of a start-up test (report/record.py), or of any test with child processes under a plan,
# carries the seed and the replay command.
REPLAYED_FIXTURES = (*STARTUP_TEST_FIXTURES, "child_runtime")

MARKERS = (
    "cpu: run only where the start-up target is cpu (combine with cuda/rocm: any of them)",
    "cuda: run only where the start-up target is cuda (--startup-target or detected)",
    "rocm: run only where the start-up target is rocm (--startup-target or detected)",
    "startup_races(transient=[...], corrupt=[...], stale=[...]): run the test once per transient"
    " race, once per persistent corruption and once per stale lock (names from RACES and"
    " CORRUPTIONS, or 'all'), and with rebuild=[...] once per corruption of a cache entry that"
    " must be rebuilt (FILE_CORRUPTIONS); explore=True races each transient case at every"
    " access point, hold=SECONDS or trigger=on_access(...)/after(...)/chaos(...) sets its window",
)
OWN_MARKER_SUFFIX = " [pytest-startup-guard]"


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_startup_guard import hooks

    pluginmanager.add_hookspecs(hooks)


def register_hooked_races(config: pytest.Config) -> None:
    """Races returned by ``pytest_startup_guard_races`` implementations (conftests, plugins)."""
    from pytest_startup_guard.races.catalog import register_races

    register_races(config.hook.pytest_startup_guard_races())


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line + OWN_MARKER_SUFFIX)
    target = options.resolve(config, "target")
    choice = choose_target(str(target.value), target.source, detect_target())
    config.stash[TARGET_CHOICE_KEY] = choice
    session = build_session(config, choice.target, choice.reason)
    session.warnings.extend(choice.warnings)
    config.stash[SESSION_KEY] = session
    for warning in session.warnings:
        config.issue_config_time_warning(
            pytest.PytestWarning(f"startup-guard: {warning}"), stacklevel=2
        )
    _configure_report(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker uses the controller's run seed."""
    node.workerinput["startup_guard_seed"] = get_session(node.config).run_seed
    node.workerinput["startup_guard_artifacts"] = _report_paths(node.config).artifacts


def pytest_report_header(config: pytest.Config) -> list[str]:
    return get_session(config).header_lines(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    names = getattr(item, "fixturenames", ())
    if not any(name in names for name in REPLAYED_FIXTURES):
        return report  # most tests of a suite: nothing to add, at the least cost
    if report.when == "call" and report.failed:
        item.stash[CALL_FAILED_KEY] = True
    if report.failed:
        report.sections.append(
            ("startup-guard", get_session(item.config).replay_section(item.nodeid))
        )
    _report_part(item, report)
    return report


# -- targets -------------------------------------------------------------------------------
# cpu/cuda/rocm detection, marker semantics and reporting live in targets/; these hooks only
# wire them in. One place owns pytest_collection_modifyitems (and each hook here): every part
# that needs a hook adds its call to the one definition below, so their order is written down.

TARGET_CHOICE_KEY = pytest.StashKey[TargetChoice]()


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    from pytest_startup_guard.verdicts.marker_places import refuse_param_markers

    refuse_param_markers(items)  # a startup_races marker in a pytest.param: never read
    choice = config.stash[TARGET_CHOICE_KEY]
    markers.select_by_target(
        config, items, choice.target, explicit=choice.explicit, own_suffix=OWN_MARKER_SUFFIX
    )
    for warning in timeouts.apply_timeout_marks(
        config, items, get_session(config).readiness_timeout
    ):
        warnings.warn(pytest.PytestWarning(f"startup-guard: {warning}"), stacklevel=1)
    from pytest_startup_guard.report.reruns import apply_no_rerun_marks

    apply_no_rerun_marks(config, items, get_session(config).allow_reruns)


@pytest.hookimpl(tryfirst=True)  # an xdist worker tells its ids in this hook: before that
def pytest_collection_finish(session: pytest.Session) -> None:
    """``--startup-guard-explore-point`` in a run where no collected test can explore is an
    error, not a replay silently ignored (after ``-k``/``-m`` deselection: ``session.items``)."""
    point = get_session(session.config).explore_point
    if point is None:
        return
    from pytest_startup_guard.races.exploration import unexplored_point_message

    if any(_may_explore(item) for item in session.items):
        return
    setting = get_session(session.config).settings["explore_point"]
    message = unexplored_point_message(setting.source, str(point), len(session.items))
    if not hasattr(session.config, "workerinput"):
        raise pytest.UsageError(message)
    # An xdist worker: a UsageError here would crash it; a collection error reaches the
    # controller, which stops the run before any test and shows the message.
    report = pytest.CollectReport(session.nodeid, "failed", longrepr=message, result=[])
    session.ihook.pytest_collectreport(report=report)
    session.items.clear()


def _may_explore(item: pytest.Item) -> bool:
    """Whether a collected test may explore access points (``races.exploration.may_explore``)."""
    from pytest_startup_guard.races.exploration import may_explore

    marker = item.get_closest_marker("startup_races")
    kwargs = dict(marker.kwargs) if marker is not None else None
    return may_explore(kwargs, getattr(item, "fixturenames", ()))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """``--startup-guard-stress=N``: start-up tests run N rounds (verdicts/stress.py); others,
    and every test without the option, run as pytest runs them."""
    session = get_session(item.config)
    rounds = session.stress
    if rounds == 1 or not is_startup_test(item):
        return None
    from pytest_startup_guard.verdicts.stress import run_rounds

    run_rounds(item, nextitem, session, rounds, _undecided)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """An error the plugin raises on purpose (``StartupGuardError``: a misuse, named with what
    is accepted) is shown at the test's own call: the plugin's frames are left out of its
    traceback, as they say nothing its message does not (``--fulltrace`` keeps them)."""
    try:
        return (yield)
    except StartupGuardError as error:
        if not item.config.getoption("fulltrace", False):
            # The same error raised again: its cause and context stay as they were.
            raise error.with_traceback(without_own_frames(error.__traceback__))  # noqa: B904
        raise


def _undecided(item: pytest.Item) -> bool:
    """Whether the test's start-up case was judged undecided (the machine too slow)."""
    case = item.stash.get(CASE_KEY, None)
    return case is not None and case.judgement is not None and case.judgement.undecided


def pytest_sessionstart(session: pytest.Session) -> None:
    # The JUnit XML is written by this process only where it holds pytest's LogXML (the xdist
    # controller, or a run without xdist); it exists from junitxml's pytest_configure on.
    junit.record_in_junit_xml(session.config, session.config.stash[TARGET_CHOICE_KEY])


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def hub_cache(tmp_path: Any, request: pytest.FixtureRequest) -> Iterator[FakeHubCache]:
    """A private fake hub cache for this test, its env applied to the test process."""
    from pytest_startup_guard.cache.env import HubEnvironment
    from pytest_startup_guard.cache.hubcache import FakeHubCache

    cache = FakeHubCache(tmp_path / "startup-guard-cache")
    _record(request).add_cache(cache)
    with HubEnvironment(cache.env).applied():
        yield cache
    end_lifetime(cache, "hub_cache", request.node.nodeid)


@pytest.fixture
def hub_remote(tmp_path: Any, request: pytest.FixtureRequest) -> Iterator[HubRemote]:
    """A hub on 127.0.0.1 for this test, serving what ``add_model``/``push`` put there; the
    test process and every process it starts download from it, online, into the test's
    ``hub_cache`` (warm) when the test uses that fixture, else into a cache that starts empty."""
    from pytest_startup_guard.cache.env import HubEnvironment
    from pytest_startup_guard.cache.hubcache import FakeHubCache
    from pytest_startup_guard.remote.hub_remote import HubRemote

    if "hub_cache" in request.fixturenames:
        cache = request.getfixturevalue("hub_cache")
    else:
        cache = FakeHubCache(tmp_path / "startup-guard-remote-cache")
        _record(request).add_cache(cache)
    remote = HubRemote(cache)
    try:
        with HubEnvironment(remote.env).applied():
            yield remote
    finally:
        problems = remote.close()  # after the environment is restored, as it was applied
        for ended in (remote, remote.cache):  # its cache: the test's hub_cache, or its own
            end_lifetime(ended, "hub_remote", request.node.nodeid)
    if problems:
        pytest.fail("startup-guard hub_remote:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture(scope="session")
def shared_hub_cache(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> FakeHubCache:
    """One fake cache for the whole run, built once even across xdist workers.

    Read-only for tests: races and corruptions refuse its repos; take ``hub_cache.copy_of(repo)``.
    """
    from filelock import FileLock

    from pytest_startup_guard.cache.hubcache import FakeHubCache

    base = tmp_path_factory.getbasetemp()
    if hasattr(pytestconfig, "workerinput"):
        base = base.parent  # shared by every worker of this run (the pytest-xdist recipe)
    with FileLock(str(base / "startup-guard-shared.lock")):
        return FakeHubCache(base / "startup-guard-shared", shared=True)


@pytest.fixture
def shared_dir(tmp_path: Path) -> Path:
    """An empty folder of this test's own that several processes share: point the servers'
    compile cache, kernel cache, lock or ``datasets`` folder at it (``env=`` or an argument),
    and race anything in it with ``hub_race.arm_path(race, path)``."""
    folder = tmp_path / "startup-guard-shared-dir"
    folder.mkdir()
    return folder


@pytest.fixture
def child_runtime(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[RuntimeController]:
    """The test side of the child runtime for this test.

    While the test runs, its plan is in ``os.environ``: every Python process the test starts
    (and their descendants) reports in, is watched under ``watch()``-ed folders, and can be held
    at an access by a listener. The test's ``hub_cache`` and ``shared_hub_cache`` are watched
    from the start (a process learns the watched folders when it starts: watch other folders
    before starting the processes that should report them). At teardown, processes declared
    with ``expect(pid, label)`` that never reported in fail the test ("plan never reached pid N").
    """
    from pytest_startup_guard.runtime.controller import RuntimeController

    controller = RuntimeController().start()
    # The plan's folder (sg-* in the temp dir) goes also when pytest dies without teardown.
    reaper = _reaper(request.config)
    try:
        reaper.add_folder(controller.folder)
        _record(request).controller = controller
        for name in ("hub_cache", "shared_hub_cache"):
            if name in request.fixturenames:
                controller.watch(request.getfixturevalue(name).root)
        if "hub_remote" in request.fixturenames:
            remote = request.getfixturevalue("hub_remote")
            controller.watch(remote.cache.root)
            remote.watch_connects(controller)  # loopback only, checked at its teardown
        with monkeypatch.context() as patch:
            for key, value in controller.env.items():
                patch.setenv(key, value)
            yield controller
        problems = controller.unreached_expected() + controller.errors
    finally:
        controller.close()
        reaper.remove_folder(controller.folder)
        end_lifetime(controller, "child_runtime", request.node.nodeid)
    if problems:
        pytest.fail("startup-guard child runtime:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def hub_race(child_runtime: RuntimeController, request: pytest.FixtureRequest) -> Iterator[HubRace]:
    """Arm transient races on this test's caches: ``hub_race.arm(race, repo, filename)``.

    Every window is closed at teardown, whatever happened; a race armed without
    ``allow_miss=True`` that no access hit fails the test.
    """
    from pytest_startup_guard.races.hubrace import HubRace
    from pytest_startup_guard.races.roots import PluginRoots

    def owned() -> dict[str, Path]:
        """Most specific first: a hub cache and a shared_dir lie under tmp_path."""
        found: dict[str, Path] = {}
        for name in ("shared_dir", "hub_cache", "tmp_path"):
            if name in request.fixturenames:
                value = request.getfixturevalue(name)
                found[name] = value if isinstance(value, Path) else Path(value.root)
        return found

    def shared() -> dict[str, Path]:
        if "shared_hub_cache" not in request.fixturenames:
            return {}
        return {"shared_hub_cache": Path(request.getfixturevalue("shared_hub_cache").root)}

    register_hooked_races(request.config)
    races = HubRace(
        child_runtime,
        get_session(request.config).seed_for(request.node.nodeid),
        PluginRoots(owned, shared),
        _explore_settings(request),
    )
    _record(request).races = races
    try:
        yield races
    finally:
        problems = races.close()
        end_lifetime(races, "hub_race", request.node.nodeid)
    if problems:
        pytest.fail("startup-guard races:\n" + "\n".join(problems), pytrace=False)


REAPER_KEY = pytest.StashKey["Reaper"]()


def _reaper(config: pytest.Config) -> Reaper:
    """This pytest process's reaper; its process starts with the first registration (the first
    ``child_runtime``, for its plan folder) or the first process the plugin starts, and ends at
    ``pytest_unconfigure``. It is the run's keeper: the import-race probe and the start-method
    checks, which cannot import the fleet, find it through ``run_marker.current_keeper``."""
    from pytest_startup_guard.fleet.reaper import Reaper
    from pytest_startup_guard.runtime.run_marker import push_keeper

    if REAPER_KEY not in config.stash:
        reaper = Reaper()
        config.stash[REAPER_KEY] = reaper
        push_keeper(reaper)
    return config.stash[REAPER_KEY]


WARM_KEY = pytest.StashKey["WarmTemplates"]()


def _warm_templates(config: pytest.Config, factory: pytest.TempPathFactory) -> WarmTemplates:
    """This pytest process's warm templates (``fleet/warm/templates.py``): one per distinct command, kept
    for the whole session (a template holds no test's state), ended at ``pytest_unconfigure``
    and, should pytest die, by the reaper (each carries the run's marker)."""
    from pytest_startup_guard.fleet.warm.templates import WarmTemplates

    if WARM_KEY not in config.stash:
        folder = factory.mktemp("startup-guard-warm", numbered=True)
        config.stash[WARM_KEY] = WarmTemplates(folder, _reaper(config), config.rootpath)
    return config.stash[WARM_KEY]


def pytest_unconfigure(config: pytest.Config) -> None:
    templates = config.stash.get(WARM_KEY, None)
    if templates is not None:
        templates.close()  # before the reaper: it would end them as left behind
    reaper = config.stash.get(REAPER_KEY, None)
    if reaper is not None:
        from pytest_startup_guard.runtime.run_marker import pop_keeper

        reaper.close()
        pop_keeper(reaper)  # a pytest run in this process (pytester) gives the outer one's back


def _run_shared_temp(config: pytest.Config, factory: pytest.TempPathFactory) -> Path:
    """A folder every xdist worker of this run shares (the run's base temp without xdist)."""
    base = factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


@pytest.fixture
def server_fleet(
    child_runtime: RuntimeController,
    hub_race: HubRace,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerFleet]:
    """Launch N real server processes at once: ``server_fleet.launch(argv, count=4, ready=...)``.

    Members get the test's ``hub_cache`` env (or ``cache=``), the race plan, then ``env=``.
    A worker of a ready member that died and that no check reported fails the test at
    teardown. Every process tree is ended at teardown (SIGTERM, SIGKILL after 5 s), also when
    pytest dies without its teardown (a reaper process outlives it).
    """
    from pytest_startup_guard.fleet.launcher import FleetLauncher
    from pytest_startup_guard.fleet.ports import PortLeases
    from pytest_startup_guard.fleet.server_fleet import ServerFleet
    from pytest_startup_guard.fleet.warm.templates import warm_mode

    session = get_session(request.config)
    default_cache = (
        request.getfixturevalue("hub_cache") if "hub_cache" in request.fixturenames else None
    )
    online_env = None
    if "hub_remote" in request.fixturenames:
        remote = request.getfixturevalue("hub_remote")
        default_cache, online_env = remote.cache, remote.env
    launcher = FleetLauncher(
        child_runtime,
        tmp_path / "startup-guard-fleet",
        PortLeases(_run_shared_temp(request.config, tmp_path_factory) / "startup-guard-ports"),
        _reaper(request.config),
        default_timeout=session.readiness_timeout,
        default_cache=default_cache,
        online_env=online_env,
        races=hub_race,
        warm_templates=_warm_templates(request.config, tmp_path_factory),
        warm_default=warm_mode(session.warm),
    )
    fleets = ServerFleet(
        launcher,
        explore_settings=hub_race.explore_settings,
        writer_settings=_writer_settings(request),
    )
    _record(request).fleets = fleets
    late: list[str] = []
    try:
        yield fleets
        # Before the stop: a worker of a ready member that died while the test went on.
        late = fleets.unreported_problems()
    finally:
        fleets.stop_all()
        end_lifetime(fleets, "server_fleet", request.node.nodeid)
    if late:
        pytest.fail(
            "a server failed after it was ready, and no check of the test saw it:\n"
            + "\n".join(f"  - {problem}" for problem in late),
            pytrace=False,
        )


CASE_KEY = pytest.StashKey["StartupCase"]()


def _explore_settings(request: pytest.FixtureRequest) -> ExploreSettings:
    """The run's explore point, and the command that replays one point of this test."""
    from pytest_startup_guard.races.exploration import ExploreSettings

    session = get_session(request.config)
    option = options.OPTIONS_BY_NAME["explore_point"].flag
    return ExploreSettings(
        only_point=session.explore_point,
        replay_point=f"{session.replay(request.node.nodeid)} {option}=",
        every_point=session.explore_all,
    )


def _writer_settings(request: pytest.FixtureRequest) -> WriterSettings:
    """The run's writer pair (``--startup-guard-writer-pair``), and the command that replays
    one pair of this test."""
    from pytest_startup_guard.fleet.explore.writer import PAIR_SLOT, WriterSettings

    session = get_session(request.config)
    setting = session.settings["writer_pair"]
    pair = setting.value
    option = options.OPTIONS_BY_NAME["writer_pair"].flag
    return WriterSettings(
        only_pair=pair if isinstance(pair, tuple) else None,
        source=setting.source,
        replay=f"{session.replay(request.node.nodeid)} {option}={PAIR_SLOT}",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``@pytest.mark.startup_races(...)``: one case per race and per corruption.

    A bad marker is a collection error of its test that says what is wrong, without a
    traceback of the plugin (``Collector.CollectError`` is shown as its message alone)."""
    found = list(metafunc.definition.iter_markers_with_node("startup_races"))
    if not found:
        return
    from pytest_startup_guard.verdicts.cases import cases_from_marker
    from pytest_startup_guard.verdicts.marker_places import (
        GivenMarker,
        marker_place,
        the_one_marker,
    )

    where = f"@pytest.mark.startup_races of {metafunc.definition.nodeid}"
    given = [
        GivenMarker(marker_place(node, metafunc.definition), mark.args, dict(mark.kwargs))
        for node, mark in found
    ]
    try:
        marker = the_one_marker(given, metafunc.definition.nodeid)
        if "startup_case" not in metafunc.fixturenames:
            raise StartupGuardError(
                f"{where} needs the startup_case fixture in the test's arguments"
            )
        register_hooked_races(metafunc.config)
        cases = cases_from_marker(marker.args, marker.kwargs, where)
    except StartupGuardError as error:
        raise pytest.Collector.CollectError(str(error)) from None
    metafunc.parametrize("startup_case", cases, ids=[case.id for case in cases], indirect=True)


@pytest.fixture
def startup_case(hub_race: HubRace, request: pytest.FixtureRequest) -> Iterator[StartupCase]:
    """One case of ``@pytest.mark.startup_races``: ``.kind``, ``.name``, ``.apply(repo,
    filename)`` and ``.check(fleet, expect=None)``. A case never checked fails the test."""
    from pytest_startup_guard.verdicts.cases import CaseSpec, StartupCase

    spec = getattr(request, "param", None)
    if not isinstance(spec, CaseSpec):
        raise pytest.UsageError(
            f"{request.node.nodeid} uses startup_case without @pytest.mark.startup_races(transient=[...],"
            " corrupt=[...], stale=[...], rebuild=[...])"
        )
    session = get_session(request.config)
    fleets = (
        request.getfixturevalue("server_fleet") if "server_fleet" in request.fixturenames else None
    )
    case = StartupCase(
        spec,
        hub_race,
        session.seed_for(request.node.nodeid),
        session.replay(request.node.nodeid),
        fleets,
    )
    request.node.stash[CASE_KEY] = case
    _record(request).case = case
    yield case
    end_lifetime(case, "startup_case", request.node.nodeid)
    unchecked = case.judgement is None and (case.repo is not None or case.entry is not None)
    if unchecked and not request.node.stash.get(CALL_FAILED_KEY, False):
        pytest.fail(
            f"startup_case {spec.id} was applied but never checked: call startup_case.check(fleet)",
            pytrace=False,
        )


@pytest.fixture
def startup_target(pytestconfig: pytest.Config) -> str:
    """The runner's target: 'cpu', 'cuda' or 'rocm'."""
    return get_session(pytestconfig).target


# -- imports -------------------------------------------------------------------------------
# The import-race probe and the start-method checks (imports/probe.py, imports/startmethods.py): standard
# library only, imported when a test asks for the fixture.

if TYPE_CHECKING:
    from pytest_startup_guard.imports.probe import ImportRaceProbe
    from pytest_startup_guard.imports.startmethods import StartMethodChecker


@pytest.fixture
def import_race(request: pytest.FixtureRequest) -> Iterator[ImportRaceProbe]:
    """``import_race(module, attrs=(...))``: race a background-thread import against the main one.

    Fresh interpreters get the test file's folder on ``PYTHONPATH``, as pytest put it on
    ``sys.path``; the result's ``.assert_safe()`` fails with every run of the sweep.
    """
    from pytest_startup_guard.imports.probe import ImportRaceProbe

    _reaper(request.config)  # the run's keeper: its interpreters end also if pytest dies
    probe = ImportRaceProbe(pythonpath=[request.path.parent])
    yield probe
    end_lifetime(probe, "import_race", request.node.nodeid)


@pytest.fixture
def start_methods(request: pytest.FixtureRequest) -> Iterator[StartMethodChecker]:
    """``.check(startup)`` under spawn, fork, forkserver and an already-set start method;
    ``.env_choices(startup, variable, allowed)`` for a variable's documented values."""
    from pytest_startup_guard.imports.startmethods import StartMethodChecker

    _reaper(request.config)  # the run's keeper: its start-ups end also if pytest dies
    checker = StartMethodChecker(pythonpath=[request.path.parent])
    yield checker
    end_lifetime(checker, "start_methods", request.node.nodeid)


# -- report --------------------------------------------------------------------------------
# The session report lives in report/ (record, timeline, artifacts, reruns, attach, run_report,
# summary). The fixtures above put what they create into the test's record (item.stash);
# pytest_runtest_makereport hands each report of a start-up test to report/attach.py, which attaches
# the test's part to it (pytest-xdist carries it to the controller); where reports are logged
# (the xdist controller, or the only process), a collector gathers the parts for the terminal
# summary and the JSON report.

if TYPE_CHECKING:
    from pytest_startup_guard.report.record import StartupRecord


def _configure_report(config: pytest.Config) -> None:
    from pytest_startup_guard.report.run_report import configure

    configure(config, get_session(config))


def _report_paths(config: pytest.Config) -> ReportPaths:
    from pytest_startup_guard.report.run_report import report_paths

    return report_paths(config)


def _record(request: pytest.FixtureRequest) -> StartupRecord:
    """The record of the test's current attempt, which the report reads."""
    from pytest_startup_guard.report.record import record_of

    return record_of(request.node)


def _report_part(item: pytest.Item, report: pytest.TestReport) -> None:
    from pytest_startup_guard.report.attach import on_makereport

    artifacts = _report_paths(item.config).artifacts
    on_makereport(item, report, get_session(item.config), Path(artifacts) if artifacts else None)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    from pytest_startup_guard.report.reruns import fail_on_hidden
    from pytest_startup_guard.report.run_report import RUN_REPORT_KEY, write_report

    run = session.config.stash.get(RUN_REPORT_KEY, None)
    if run is None:
        return  # an xdist worker: the controller reports
    guard = get_session(session.config)
    run.strict_failed = fail_on_hidden(session, len(run.hidden()), guard.strict_reruns)
    paths = _report_paths(session.config)
    if paths.report is not None or paths.html is not None:
        write_report(
            run,
            Path(paths.report) if paths.report else None,
            session,
            guard,
            Path(paths.html) if paths.html else None,
        )


def pytest_terminal_summary(
    terminalreporter: Any, exitstatus: int | pytest.ExitCode, config: pytest.Config
) -> None:
    from pytest_startup_guard.report.run_report import RUN_REPORT_KEY
    from pytest_startup_guard.report.summary import write_terminal_summary

    run = config.stash.get(RUN_REPORT_KEY, None)
    if run is not None:
        guard = get_session(config)
        write_terminal_summary(terminalreporter, run, guard, guard.strict_reruns)
