"""Verdicts: a transient race must be survived, and really hit; a persistent corruption must
still fail, in bounded time, with a message that names the file or the repo.

Error text cannot tell a transient fault from a permanent one: a config that is missing for a
moment and one that is gone give the same ``OSError`` or ``ValueError: Unrecognized model``. Only the outcome over time can, so a start-up is judged on that:

- **transient** ⇒ every member became ready, with the real config (the probe's ``expect`` or
  ``check(expect=...)``), the race hit every member at least once, and every process that read
  the raced file since arming (workers too; the test process aside) was hit (else the case
  proves nothing for it, and says when it read the file against the windows);
- **corrupt** ⇒ no member became ready, each exited non-zero before the readiness time-out,
  with output naming the file or the repo. Hanging is failing; coming up is hiding it;
- **stale** (a lock a dead process left) ⇒ every member met the lock, and each either became
  ready (it recovered: broke the lock or went on without it) or exited non-zero before the
  readiness time-out with output naming the lock. Waiting forever is failing;
- **rebuild** (a corrupt cache entry, ``rebuild``) ⇒ every member became ready, read the entry,
  and left it whole: discarded and rebuilt, not loaded, refused or left in place.

Time-outs count each member's own time (``runtime/own_time.py``), so a busy machine does not
turn a slow start into a hang. A member the machine never gave its time is *undecided*; a check
whose only problems are undecided (``outcomes.Problem``: each problem carries its outcome) says
so ("UNDECIDED: the machine was too slow to decide") instead of calling the start-up good or bad.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_startup_guard.cache.corruptions import CORRUPTIONS
from pytest_startup_guard.cache.file_corruptions import FILE_CORRUPTIONS
from pytest_startup_guard.cache.hubcache import CachedRepo
from pytest_startup_guard.checks import function, instance, seconds, shown
from pytest_startup_guard.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    StartupGuardError,
    UnknownNameError,
)
from pytest_startup_guard.fleet.explore.request import ExploreRequest
from pytest_startup_guard.fleet.fleet import Fleet
from pytest_startup_guard.fleet.server import Server
from pytest_startup_guard.fleet.server_fleet import ServerFleet
from pytest_startup_guard.lifetimes import lives_for_its_test
from pytest_startup_guard.outcomes import (
    UNDECIDED_MARK,
    Problem,
    all_not_judged,
    all_undecided,
    failed,
)
from pytest_startup_guard.races.armed import ArmedRace
from pytest_startup_guard.races.base import RaceTarget
from pytest_startup_guard.races.catalog import RACES, races_for_all, stale_races
from pytest_startup_guard.races.exploration import FLEET_MODES, Exploration, Mode
from pytest_startup_guard.races.hubrace import HubRace
from pytest_startup_guard.races.triggers import (
    Chaos,
    OnAccess,
    Placed,
    Trigger,
    checked_trigger,
    with_hold,
)
from pytest_startup_guard.runtime.events import (
    LOOK_OPS,
    READ_OPS,
    TEST_PROCESS,
    AccessEvent,
)
from pytest_startup_guard.runtime.own_time import HOLD_MAX_STRETCH
from pytest_startup_guard.verdicts.exploring import CaseExploration
from pytest_startup_guard.verdicts.fail_closed import corrupt_problems, stale_problems
from pytest_startup_guard.verdicts.kinds import KINDS, WORDS, CaseKind
from pytest_startup_guard.verdicts.members import (
    accepts,
    undecided,
)
from pytest_startup_guard.verdicts.rebuild import CorruptEntry, corrupt_entry, rebuild_problems
from pytest_startup_guard.verdicts.timing import Clock, retry_words, unhit_reader_words

# How long a failed transient check waits for an open window to close by itself, to say how
# long it was open (a window of the default hold closes within tens of milliseconds).
WINDOW_SETTLE_SECONDS = 2.0
# Why a process's read of the raced file may not have been seen. Native accesses are not turned
# on by themselves: they load a library into every process of the fleet (LD_PRELOAD) built with
# the system's C compiler, which changes the processes under test; a user asks for them.
UNSEEN_READS = (
    "does it read the file? is its interpreter under the plugin? a read in native code, such as"
    " Rust or C (tokenizers, safetensors), is seen only with"
    " server_fleet.launch(native_accesses=True)"
)


@dataclass(frozen=True)
class CaseSpec:
    """One case of the ``startup_races`` matrix."""

    kind: CaseKind
    name: str
    explore: Mode | None = None  # a transient case raced at every access point: its mode
    # A transient case's trigger from the marker (``trigger=``, its hold filled by ``hold=``);
    # None: on_access() with the race's default hold.
    trigger: Trigger | None = None
    hold: float | None = None  # the marker's ``hold=``: also fills apply(trigger=on_access())

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.name}"


def _names(
    value: object, kind: CaseKind, catalog: Iterable[str], everything: list[str], where: str
) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) and value == "all":
        return list(everything)
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise StartupGuardError(
            f"invalid {kind}={shown(value)} in {where}: expected a list of names or 'all'"
        )
    known = set(catalog)
    for name in value:
        if not isinstance(name, str):  # a list in the list, a set, None: named, not hashed
            kind_of = type(name).__name__
            raise ArgumentTypeError(
                f"invalid {kind}={shown(value)} in {where}: {shown(name)} is"
                f" {'an' if kind_of[:1] in 'aeiou' else 'a'} {kind_of}; expected a list of"
                f" {WORDS[kind].noun} names (str) or 'all'"
            )
        if name not in known:
            raise UnknownNameError(WORDS[kind].noun, name, known, where)
    return list(dict.fromkeys(value))


def cases_from_marker(
    args: Sequence[object], kwargs: dict[str, object], where: str
) -> list[CaseSpec]:
    """The cases of ``@pytest.mark.startup_races(transient=[...], corrupt=[...], stale=[...],
    rebuild=[...])``."""
    if args:
        raise StartupGuardError(
            f"{where} takes keyword arguments only:"
            " startup_races(transient=[...], corrupt=[...], stale=[...], rebuild=[...])"
        )
    unknown = set(kwargs) - {*KINDS, "explore", "hold", "trigger"}
    if unknown:
        raise StartupGuardError(
            f"unknown keyword {sorted(unknown)[0]!r} in {where}; expected transient=, corrupt="
            " and/or stale= and rebuild= (the kinds of case), and explore=, hold= or trigger= for"
            " the transient cases"
        )
    explore = _explore_mode(kwargs.get("explore", False), where)
    hold, trigger = _timing(kwargs, where)
    transient_names = [name for name in RACES if not RACES[name].stale]
    transient = _names(
        kwargs.get("transient"), "transient", transient_names, races_for_all(), where
    )
    corrupt = _names(kwargs.get("corrupt"), "corrupt", CORRUPTIONS, list(CORRUPTIONS), where)
    stale = _names(kwargs.get("stale"), "stale", stale_races(), stale_races(), where)
    files = list(FILE_CORRUPTIONS)
    rebuild = _names(kwargs.get("rebuild"), "rebuild", files, files, where)
    if not transient and not corrupt and not stale and not rebuild:
        raise StartupGuardError(
            f"{where} names no case: give transient=[...], corrupt=[...], stale=[...] and/or"
            " rebuild=[...]"
        )
    if explore is not None and not transient:
        raise StartupGuardError(
            f"explore={kwargs['explore']!r} in {where} races transient cases at every access"
            " point, and this marker names none: add transient=[...]"
        )
    timed = [f"{key}={kwargs[key]!r}" for key in ("hold", "trigger") if kwargs.get(key) is not None]
    if timed and not transient:
        raise StartupGuardError(
            f"{' and '.join(timed)} in {where} sets the window of transient cases, and this marker"
            " names none: add transient=[...], or leave it out"
        )
    if timed and explore is not None:
        raise StartupGuardError(
            f"{' and '.join(timed)} in {where}: explore={kwargs['explore']!r} opens a window at"
            " every access point with the exploration's own hold (0.5 s); leave hold= and"
            " trigger= out, or explore= off"
        )
    return (
        [CaseSpec("transient", name, explore, trigger, hold) for name in transient]
        + [CaseSpec("corrupt", name) for name in corrupt]
        + [CaseSpec("stale", name) for name in stale]
        + [CaseSpec("rebuild", name) for name in rebuild]
    )


def _timing(kwargs: dict[str, object], where: str) -> tuple[float | None, Trigger | None]:
    """The marker's ``hold=`` (seconds) and ``trigger=`` (a trigger, its hold filled by
    ``hold=`` where it left it out), each checked: a bad one names itself and the test."""
    raw_hold = kwargs.get("hold")
    hold = None if raw_hold is None else seconds("hold", raw_hold, where)
    raw_trigger = kwargs.get("trigger")
    trigger = None if raw_trigger is None else checked_trigger(raw_trigger, where)
    return hold, with_hold(trigger, hold, where)


def _explore_mode(value: object, where: str) -> Mode | None:
    """``explore=True`` (parallel), ``"parallel"``, ``"sequential"``, or False/None (off)."""
    if value is None or value is False:
        return None
    if value is True:
        return "parallel"
    for mode in FLEET_MODES:
        if value == mode:
            return mode
    raise StartupGuardError(
        f"invalid explore={value!r} in {where}: expected True (parallel), 'parallel',"
        " 'sequential' or False"
    )


@dataclass
class Judgement:
    """What a check concluded, kept for the report (which reads each member from its fleet)."""

    passed: bool
    message: str
    undecided: bool = False  # failed only because the machine was too slow to decide


@lives_for_its_test
class StartupCase:
    """The ``startup_case`` fixture: one case of the matrix, applied and judged."""

    def __init__(
        self,
        spec: CaseSpec,
        races: HubRace,
        seed: int,
        replay: str,
        fleets: ServerFleet | None = None,
    ) -> None:
        self.spec = spec
        self.races = races
        self.seed = seed
        self.replay = replay
        self.fleets = fleets  # the test's server_fleet: an explore=True case explores its launch
        self.armed: ArmedRace | None = None
        self.target: str | None = None
        self.repo: CachedRepo | None = None
        self.filename: str | None = None
        self.path: Path | None = None  # what a generic race or stale lock was applied to
        self.entry: CorruptEntry | None = None  # a rebuild case's corrupted cache entry
        self.judgement: Judgement | None = None
        self.exploring: CaseExploration | None = None  # explore=True: it takes the launch
        self.applied_t: float | None = None  # time.monotonic() when apply() was done

    @property
    def kind(self) -> CaseKind:
        return self.spec.kind

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        return f"<startup_case {self.spec.id}>"

    def apply(
        self,
        target: CachedRepo | str | os.PathLike[str],
        filename: str | None = None,
        *,
        trigger: Trigger | None = None,
    ) -> None:
        """Arm the race, write the corruption, or leave the stale lock: on ``filename`` of a hub
        repo (``apply(repo, "config.json")``), or, for a generic race or a stale lock, on a path
        under a root the plugin owns (``apply(shared_dir / "triton" / "kernel.json")``).

        A transient case races with ``trigger`` if given, else the marker's ``trigger=``, else
        ``on_access()``; an ``on_access()`` without a hold takes the marker's ``hold=``, else
        the race's modelled window plus 20 ms."""
        if self.applied:
            raise StartupGuardError(
                f"startup_case {self.spec.id} was already applied to {self.target}"
            )
        case_trigger = self._trigger(trigger)
        if self.kind == "rebuild":
            self._apply_rebuild(target, filename)
            return
        race = RACES.get(self.name) if self.kind != "corrupt" else None
        if isinstance(target, CachedRepo):
            if not isinstance(filename, str):
                raise StartupGuardError(
                    f"startup_case {self.spec.id}: apply(repo, filename) needs the file's name"
                    f" in the repo, not {filename!r}"
                )
            self._apply_to_file(target, filename, case_trigger)
            self.repo, self.filename = target, filename  # applied: only once it worked
            self.target = f"{filename} of {target}"
            self.applied_t = time.monotonic()
            return
        if not isinstance(target, (str, os.PathLike)) or filename is not None:
            raise StartupGuardError(
                f"startup_case {self.spec.id}: apply() takes (repo, filename) or one path under a"
                f" folder the plugin owns, not {target!r}" + (f", {filename!r}" if filename else "")
            )
        if race is None or not race.on_paths or self.spec.explore is not None:
            raise StartupGuardError(
                f"startup_case {self.spec.id} works on a hub repo's file: apply(repo, filename);"
                " a path takes generic races and stale locks only"
                + (", and explore=True cases explore a hub repo's file" if race else "")
            )
        self.armed = self.races.arm_path(self.name, target, trigger=case_trigger, allow_miss=True)
        self.path = Path(getattr(self.armed.target, "path", target))
        self.target = self.armed.target.label
        self.applied_t = time.monotonic()

    def _apply_to_file(
        self, target: CachedRepo, filename: str, case_trigger: Trigger | None
    ) -> None:
        """Corrupt ``filename`` of the repo, arm the race on it, or (``explore=True``) take the
        test's launch to explore it."""
        if self.kind == "corrupt":
            target.cache.corrupt(target, filename, self.name)
        elif self.spec.explore is not None:  # nothing armed: the launch explores
            RaceTarget.of(target, filename, None)  # a file the repo lacks: an error now
            if self.fleets is None:
                raise StartupGuardError(
                    f"startup_case {self.spec.id} explores every access point of a fleet's"
                    " start-up: ask for the server_fleet fixture and launch it after apply()"
                )
            request = ExploreRequest(self.name, target, filename, self.spec.explore)
            exploring = CaseExploration(self.fleets, request)
            self.fleets.route_launches(exploring)
            self.exploring = exploring
        else:  # check() judges hits
            self.armed = self.races.arm(
                self.name, target, filename, trigger=case_trigger, allow_miss=True
            )

    def _apply_rebuild(self, target: object, filename: object) -> None:
        """Write the case's corruption onto the cache entry at ``target`` (a plain file under a
        folder the plugin owns for this test), keeping its bytes to judge it afterwards."""
        where = f"startup_case.apply() of case {self.spec.id}"
        if not isinstance(target, (str, os.PathLike)) or filename is not None:
            given = shown(target) + (f", {shown(filename)}" if filename is not None else "")
            raise ArgumentTypeError(
                f"invalid apply({given}) for {where}: a rebuild case corrupts a cache entry, a"
                " plain file: expected apply(path), one path under the test's shared_dir,"
                " hub_cache or tmp_path"
            )
        self.entry = corrupt_entry(self.name, target, self.races, self.seed, where)
        self.path, self.target = self.entry.path, self.entry.label
        self.applied_t = self.entry.applied_t

    def _trigger(self, given: object) -> Trigger | None:
        """The trigger this case races with: ``apply(trigger=)`` (checked), else the marker's;
        the marker's ``hold=`` fills an ``on_access()`` that gave no hold."""
        where = f"startup_case.apply() of case {self.spec.id}"
        if given is None:
            return self.spec.trigger if self.spec.trigger is not None else None
        if self.kind != "transient" or self.spec.explore is not None:
            what = {
                "corrupt": "a corruption is written once and stays",
                "stale": "a stale lock stays from apply() until teardown",
                "rebuild": "a cache entry's corruption is written once and stays",
                "transient": "an explore=True case opens a window at every access point itself",
            }[self.kind]
            raise StartupGuardError(
                f"invalid trigger={given!r} for {where}: {what}, so it takes no trigger; give"
                " trigger= to transient cases only"
            )
        checked = checked_trigger(given, where)
        if isinstance(checked, OnAccess) and checked.hold is None and self.spec.hold is not None:
            return replace(checked, hold=self.spec.hold)
        return checked

    @property
    def exploration(self) -> Exploration | None:
        """What the launch of an ``explore=True`` case explored (None before it, or otherwise)."""
        found = self.exploring.found if self.exploring is not None else None
        return found.exploration if found is not None else None

    @property
    def applied(self) -> bool:
        return self.repo is not None or self.path is not None

    def check(
        self,
        fleet: Fleet,
        expect: Callable[[Server], object] | None = None,
        *,
        whole: Callable[[bytes], object] | None = None,
    ) -> None:
        """Judge the fleet: survive a transient race, fail closed on a corruption, rebuild a
        corrupt cache entry (``whole(bytes)``: the user's rule for a rebuilt entry)."""
        __tracebackhide__ = True
        self._refuse_a_second_check()
        if not self.applied:
            raise StartupGuardError(
                "startup_case.check() before apply(repo, filename) or apply(path): nothing was raced"
            )
        self._check_arguments(fleet, expect)
        self._check_whole(whole)
        # Every worker's fate first (and counted as reported): a start-up is judged on every
        # process that did start-up work, not on the member's probe alone.
        workers = fleet.worker_problems_by_server() if self.exploring is None else {}
        if self.exploring is not None:
            problems = self._explored(fleet)
        elif self.kind == "transient":
            problems = self._transient(fleet, expect, workers)
        elif self.kind == "stale":
            assert self.armed is not None
            problems = stale_problems(fleet, workers, self.armed)
        elif self.entry is not None:
            controller = self.races.controller
            problems = rebuild_problems(self.entry, fleet, controller, workers, expect, whole)
        else:
            assert self.repo is not None and self.filename is not None
            changed = [c.path for c in self.repo.cache.corruptions if c.filename == self.filename]
            problems = corrupt_problems(fleet, self.repo, self.filename, self.name, changed)
        verdict = WORDS[self.kind].done
        undecided = all_undecided(problems)
        self.judgement = Judgement(not problems, "", undecided)
        if problems:
            about = f"startup_case {self.spec.id} on {self.target}"
            if undecided:
                header = f"{about}: {UNDECIDED_MARK}the machine was too slow to decide whether the start-up {verdict}:"
            elif all_not_judged(problems):
                header = f"{about}: the start-up could not be judged, so it is not green:"
            else:
                header = f"{about}: the start-up was expected to have {verdict}, but:"
            message = "\n".join(
                [
                    header,
                    *(f"  - {p}" for p in problems),
                    "",
                    str(self.exploration) if self.exploration is not None else fleet.summary(),
                    "",
                    f"test seed {self.seed}; replay: {self.replay}",
                ]
            )
            self.judgement.message = message
            raise AssertionError(message)

    def _refuse_a_second_check(self) -> None:
        """A case is checked once: a second check would judge the same start-up again."""
        if self.judgement is None:
            return
        said = "passed" if self.judgement.passed else "failed"
        raise StartupGuardError(
            f"startup_case.check() of case {self.spec.id} was already called in this test (it"
            f" {said}): a case is checked once, on the fleet launched after apply(); to judge"
            " another fleet, split the test"
        )

    def _check_arguments(self, fleet: object, expect: object) -> None:
        """``check(fleet)`` takes the fleet ``server_fleet.launch()`` returned after
        ``apply()``: a fleet launched before it never met the case."""
        where = f"startup_case.check() of case {self.spec.id}"
        if isinstance(fleet, ServerFleet):
            raise ArgumentTypeError(
                f"invalid fleet=server_fleet for {where}: expected the fleet that"
                " server_fleet.launch(...) returned (fleet = server_fleet.launch(...);"
                " startup_case.check(fleet))"
            )
        launched = instance(
            "fleet", fleet, Fleet, where, "the fleet that server_fleet.launch(...) returned"
        )
        if expect is not None:
            function("expect", expect, where, "a callable that takes a Server and says yes or no")
        released = launched.released_t
        if (
            self.exploring is None
            and released is not None
            and self.applied_t is not None
            and released < self.applied_t
        ):
            raise StartupGuardError(
                f"{where}: this fleet was launched before the case was applied, so its start-up"
                f" never met {self.spec.id}; call startup_case.apply(...) first, then"
                " server_fleet.launch(...), then startup_case.check(fleet)"
            )

    def _check_whole(self, whole: object) -> None:
        """``whole=`` judges a rebuilt cache entry: a rebuild case's, and a callable."""
        if whole is None:
            return
        where = f"startup_case.check() of case {self.spec.id}"
        if self.kind != "rebuild":
            raise InvalidArgumentError(
                f"invalid whole={shown(whole)} for {where}: whole= judges the cache entry a"
                f" rebuild case corrupted, and this is a {self.kind} case; leave it out"
            )
        function(
            "whole", whole, where, "a callable that takes the entry's bytes and says yes or no"
        )

    def _transient(
        self,
        fleet: Fleet,
        expect: Callable[[Server], object] | None,
        workers: dict[int, list[str]],
    ) -> list[Problem]:
        self._let_windows_close(fleet)
        self.races.hits  # noqa: B018 - reads a chaos refresher's windows into its hits
        problems: list[Problem] = []
        readers = set(self._raced_reads())
        for server in fleet.servers:
            if server.state == "undecided":
                problems.append(undecided(server))
                continue
            if server.state == "rejected":
                problems.append(
                    Problem(
                        f"server {server.index} came up on the wrong config (a fallback?): {server.reason}"
                    )
                )
            elif not server.ready:
                problems.append(
                    Problem(
                        f"server {server.index} did not survive the race: {server.status()}"
                        + "".join(f"; {line}" for line in self._retried(server, fleet))
                    )
                )
            elif workers.get(server.index):
                # It answered its probe, but a process of it died: that is not surviving.
                problems.extend(failed(workers[server.index]))
                problems.extend(
                    Problem(f"server {server.index}: {line}")
                    for line in self._retried(server, fleet)
                )
            elif expect is not None and not accepts(expect, server):
                problems.append(
                    Problem(
                        f"server {server.index} is up but check(expect=...) rejected what it serves"
                    )
                )
            if not server.hits and not server.ready:
                problems.append(
                    Problem(
                        f"the race never hit server {server.index}: this case proves nothing for it"
                        f" (none of its processes was seen to access {self._raced_name()} while"
                        f" the race changed it: {UNSEEN_READS})"
                    )
                )
            elif server.ready:
                problems.extend(self._not_judged(server, readers))
                problems.extend(self._cut_short(server))
        return problems + failed(self._unhit_readers(fleet))

    def _cut_short(self, server: Server) -> list[Problem]:
        """A process of a member that started up whose every hit was in a window its hold was
        cut in (``ArmedRace.cut_short``: HOLD_MAX_STRETCH x the hold of wall time passed before it had
        the hold in its own time): the access it was let go at may have run after the window
        closed, so surviving is not shown: undecided, the machine's doing, never green."""
        armed = self.armed
        if armed is None or not armed.cut_short:
            return []
        windows: dict[int, set[int]] = {}
        for hit in server.hits:
            if hit in armed.hits:
                windows.setdefault(hit.pid, set()).add(hit.window)
        return [
            Problem.undecided(
                f"server {server.index}: pid {pid} met the change, but the machine was too busy"
                f" to hold its window for {self._raced_name()} in its own time (it was closed"
                f" after {HOLD_MAX_STRETCH:g} x the hold of wall time), so its access may have run"
                " after the window closed: whether it survived the race is not known"
            )
            for pid, met in sorted(windows.items())
            if met <= armed.cut_short.get(pid, set())
        ]

    def _not_judged(self, server: Server, readers: set[int]) -> list[Problem]:
        """A member that started up, each of whose processes that did start-up work (its
        workers that touched the cache, else the member itself) must have met the change or
        been seen to read the raced file (then ``_unhit_readers`` says when): one that was
        neither could not be judged, and is not counted as surviving."""
        met = {hit.pid for hit in server.hits}
        working = [worker for worker in server.workers if worker.first_access_t is not None]
        processes = {worker.pid: worker.label() for worker in working} or {server.pid: ""}
        unseen = [pid for pid in processes if pid not in met and pid not in readers]
        name = self._raced_name()
        problems = []
        for pid in unseen:
            who = (
                f"{processes[pid]} of server {server.index}"
                if processes[pid]
                else (f"server {server.index} (pid {pid})")
            )
            problems.append(
                Problem(
                    f"{who} could not be judged: it started up, but was never seen to read"
                    f" {name}, in a window or out of one, so whether it survived the race is not"
                    f" known and it is not counted as surviving ({UNSEEN_READS})",
                    "not judged",
                )
            )
        return problems

    def _let_windows_close(self, fleet: Fleet, within: float = WINDOW_SETTLE_SECONDS) -> None:
        """Where a member did not start up, give an open window (at most ``within`` seconds)
        to close by itself, so that the message can say how long it was open."""
        armed = self.armed
        if armed is None or isinstance(armed.trigger, (Chaos, Placed)):
            return
        if all(server.ready for server in fleet.servers):
            return
        deadline = time.monotonic() + within
        while armed.is_open and time.monotonic() < deadline:
            time.sleep(0.005)

    def _clock(self, fleet: Fleet) -> Clock:
        if fleet.released_t is not None:
            return Clock(fleet.released_t, "the fleet's release")
        assert self.armed is not None
        return Clock(self.armed.armed_t, "arming the race")

    def _raced_reads(self) -> dict[int, list[AccessEvent]]:
        """Each process's reads of the raced file since arming, and its looks at it (a
        ``stat`` that decides, as huggingface_hub's ``isfile``), oldest first (the test
        process's aside: a case judges the fleet, and a test may read the file itself)."""
        armed = self.armed
        if armed is None:
            return {}
        controller = self.races.controller
        with controller.lock:
            # Looks only where a look meets the change (ArmedRace.meets_change): a race that
            # removes a name, not a rewrite in place.
            looks = controller.looks if armed.race.looks_meet() else []
            accesses = sorted([*controller.accesses, *looks], key=lambda a: a.t)
        reads: dict[int, list[AccessEvent]] = {}
        for access in accesses:
            if (
                access.t >= armed.armed_t
                and access.op in (*READ_OPS, *LOOK_OPS)
                and access.member != TEST_PROCESS
                and access.pid != os.getpid()
                and armed.reads_raced_file(access.path)
            ):
                reads.setdefault(access.pid, []).append(access)
        return reads

    def _retried(self, server: Server, fleet: Fleet) -> list[str]:
        """For a member that met the race and did not start up: the windows each of its
        processes met, and how long that process retried (its first hit to its last read of the
        raced file)."""
        armed = self.armed
        if armed is None:
            return []
        hits = [hit for hit in server.hits if hit in armed.hits]
        if not hits:
            return []
        clock = self._clock(fleet)
        reads = self._raced_reads()
        lines = []
        for pid in sorted({hit.pid for hit in hits}):
            own = [hit for hit in hits if hit.pid == pid]
            # An access that opened a window proceeds once it is open: met then, not before.
            first = min(max(hit.t, armed.windows[hit.window].opened_t) for hit in own)
            # Its last read of the raced file, not its exit: a process that died at its first
            # hit may take tens of milliseconds to exit, and did not retry meanwhile.
            last_read = max((a.t for a in reads.get(pid, [])), default=max(h.t for h in own))
            end_t, end = max(first, last_read), f"its last read of {self._raced_name()}"
            windows = sorted({hit.window for hit in own})
            found = min(own, key=lambda hit: hit.t).found
            lines.append(retry_words(pid, armed.windows, windows, first, end_t, end, clock, found))
        return lines

    def _unhit_readers(self, fleet: Fleet) -> list[str]:
        """Never vacuous, per process: each process that read the raced file must have been
        hit; one line for each that was not, with its read and the windows around it."""
        armed = self.armed
        if armed is None:
            return []
        hit = armed.hit_pids()
        clock = self._clock(fleet)
        problems = []
        for pid, reads in sorted(self._raced_reads().items()):
            if pid in hit:
                continue
            who = next(
                (f"server {s.index}" for s in fleet.servers if pid in fleet.members_pids(s)),
                "not a member of this fleet",
            )
            problems.append(
                unhit_reader_words(pid, who, self._raced_name(), reads[0].t, armed.windows, clock)
            )
        return problems

    def _raced_name(self) -> str:
        """What the race changes, in a message's words (``config.json``, ``refs/main``)."""
        if self.armed is not None:
            return self.armed.changed_label()
        if self.filename is not None:
            return self.filename
        return self.path.name if self.path is not None else "the raced file"

    def _explored(self, fleet: Fleet) -> list[Problem]:
        """Survived at every access point: each point that did not is a problem."""
        found = self.exploring.found if self.exploring is not None else None
        if found is None or found.clean is not fleet:
            raise StartupGuardError(
                f"startup_case {self.spec.id} explores: check the fleet its server_fleet.launch()"
                " returned after apply(); that launch explores every access point"
            )
        return [point.as_problem() for point in found.exploration.not_survived]
