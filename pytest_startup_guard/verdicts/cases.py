"""Verdicts: a transient race must be survived, and really hit; a persistent corruption must
still fail, in bounded time, with a message that names the file or the repo.

Error text cannot tell a transient fault from a permanent one (FACTS.md): both give the same
exceptions. Only the outcome over time can, so a start-up is judged on that:

- **transient** ⇒ every member became ready, with the real config (the probe's ``expect`` or
  ``check(expect=...)``), and the race hit every member at least once (else the case proves
  nothing);
- **corrupt** ⇒ no member became ready, each exited non-zero before the readiness time-out,
  with output naming the file or the repo. Hanging is failing; coming up is hiding it.

Time-outs count each member's own time (``runtime/own_time.py``), so a busy machine does not
turn a slow start into a hang. A member the machine never gave its time is *undecided*; a check
whose only problems are undecided members says so ("UNDECIDED: the machine was too slow to
decide") instead of calling the start-up good or bad.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_startup_guard.cache.corruptions import CORRUPTIONS
from pytest_startup_guard.cache.hubcache import CachedRepo
from pytest_startup_guard.errors import StartupGuardError, UnknownNameError
from pytest_startup_guard.fleet.fleet import Fleet, Server
from pytest_startup_guard.races.armed import ArmedRace
from pytest_startup_guard.races.catalog import RACES, races_for_all
from pytest_startup_guard.races.hubrace import HubRace

KINDS = ("transient", "corrupt")


@dataclass(frozen=True)
class CaseSpec:
    """One case of the ``startup_races`` matrix."""

    kind: str  # "transient" or "corrupt"
    name: str

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.name}"


def _names(
    value: object, kind: str, catalog: Iterable[str], everything: list[str], where: str
) -> list[str]:
    if value is None:
        return []
    if value == "all":
        return list(everything)
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise StartupGuardError(
            f"invalid {kind}={value!r} in {where}: expected a list of names or 'all'"
        )
    known = set(catalog)
    for name in value:
        if name not in known:
            noun = "race" if kind == "transient" else "corruption"
            raise UnknownNameError(noun, name, known, where)
    return list(dict.fromkeys(value))


def cases_from_marker(
    args: Sequence[object], kwargs: dict[str, object], where: str
) -> list[CaseSpec]:
    """The cases of ``@pytest.mark.startup_races(transient=[...], corrupt=[...])``."""
    if args:
        raise StartupGuardError(
            f"{where} takes keyword arguments only: startup_races(transient=[...], corrupt=[...])"
        )
    unknown = set(kwargs) - set(KINDS)
    if unknown:
        raise StartupGuardError(
            f"unknown keyword {sorted(unknown)[0]!r} in {where}; expected transient= and/or corrupt="
        )
    transient = _names(kwargs.get("transient"), "transient", RACES, races_for_all(), where)
    corrupt = _names(kwargs.get("corrupt"), "corrupt", CORRUPTIONS, list(CORRUPTIONS), where)
    if not transient and not corrupt:
        raise StartupGuardError(f"{where} names no case: give transient=[...] and/or corrupt=[...]")
    return [CaseSpec("transient", name) for name in transient] + [
        CaseSpec("corrupt", name) for name in corrupt
    ]


@dataclass
class Judgement:
    """What a check concluded, kept for the report."""

    passed: bool
    message: str
    members: list[dict[str, Any]] = field(default_factory=list)
    undecided: bool = False  # failed only because the machine was too slow to decide


def _member_facts(server: Server) -> dict[str, Any]:
    return {
        "index": server.index,
        "pid": server.pid,
        "state": server.state,
        "ready": server.ready,
        "seconds_to_ready": server.seconds_to_ready,
        "returncode": server.returncode,
        "seconds_to_exit": server.seconds_to_exit,
        "seconds_waiting": server.seconds_waiting,
        "hits": len(server.hits),
    }


class StartupCase:
    """The ``startup_case`` fixture: one case of the matrix, applied and judged."""

    def __init__(self, spec: CaseSpec, races: HubRace, seed: int, replay: str) -> None:
        self.spec = spec
        self.races = races
        self.seed = seed
        self.replay = replay
        self.armed: ArmedRace | None = None
        self.target: str | None = None
        self.repo: CachedRepo | None = None
        self.filename: str | None = None
        self.judgement: Judgement | None = None

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        return f"<startup_case {self.spec.id}>"

    def apply(self, repo: CachedRepo, filename: str) -> None:
        """Arm the race (its default deterministic trigger) or write the corruption."""
        if self.repo is not None:
            raise StartupGuardError(
                f"startup_case {self.spec.id} was already applied to {self.target}"
            )
        self.repo, self.filename = repo, filename
        self.target = f"{filename} of {repo}"
        if self.kind == "transient":
            self.armed = self.races.arm(
                self.name, repo, filename, allow_miss=True
            )  # check() judges hits
        else:
            repo.cache.corrupt(repo, filename, self.name)

    def check(self, fleet: Fleet, expect: Callable[[Server], object] | None = None) -> None:
        """Judge the fleet: survive a transient race, fail closed on a corruption."""
        __tracebackhide__ = True
        if self.repo is None:
            raise StartupGuardError(
                "startup_case.check() before apply(repo, filename): nothing was raced"
            )
        problems = (
            self._transient(fleet, expect) if self.kind == "transient" else self._corrupt(fleet)
        )
        verdict = "survived" if self.kind == "transient" else "failed closed"
        undecided = bool(problems) and all(problem.startswith(UNDECIDED) for problem in problems)
        self.judgement = Judgement(
            not problems, "", [_member_facts(s) for s in fleet.servers], undecided
        )
        if problems:
            header = (
                f"startup_case {self.spec.id} on {self.target}: UNDECIDED: the machine was too"
                f" slow to decide whether the start-up {verdict}:"
                if undecided
                else f"startup_case {self.spec.id} on {self.target}: the start-up was expected to"
                f" have {verdict}, but:"
            )
            message = "\n".join(
                [
                    header,
                    *(f"  - {p}" for p in problems),
                    "",
                    fleet.summary(),
                    "",
                    f"test seed {self.seed}; replay: {self.replay}",
                ]
            )
            self.judgement.message = message
            raise AssertionError(message)

    def _transient(self, fleet: Fleet, expect: Callable[[Server], object] | None) -> list[str]:
        problems = []
        for server in fleet.servers:
            if server.state == "undecided":
                problems.append(_undecided(server))
                continue
            if server.state == "rejected":
                problems.append(
                    f"server {server.index} came up on the wrong config (a fallback?): {server.reason}"
                )
            elif not server.ready:
                problems.append(
                    f"server {server.index} did not survive the race: {server.status()}"
                )
            elif expect is not None and not _accepts(expect, server):
                problems.append(
                    f"server {server.index} is up but check(expect=...) rejected what it serves"
                )
            if not server.hits:
                problems.append(
                    f"the race never hit server {server.index}: this case proves nothing for it"
                    " (does it read the file? is its interpreter under the plugin?)"
                )
        return problems

    def _corrupt(self, fleet: Fleet) -> list[str]:
        assert self.repo is not None and self.filename is not None
        names = {self.repo.repo_id, self.filename, self.repo.folder_name}
        problems = []
        for server in fleet.servers:
            if server.state == "undecided":
                problems.append(_undecided(server))
            elif server.ready or server.state == "rejected":
                problems.append(
                    f"server {server.index} came up on a corrupt {self.filename} ({self.name}): it hid"
                    " the corruption"
                )
            elif server.state == "hung":
                problems.append(
                    f"server {server.index} hung: still running on a corrupt config ({server.reason});"
                    " hanging is failing, it must exit with an error"
                )
            elif server.returncode == 0:
                problems.append(f"server {server.index} exited with code 0 on a corrupt config")
            elif (server.own_seconds_to_exit or 0.0) >= fleet.timeout:
                problems.append(
                    f"server {server.index} failed only after the readiness time-out: it exited"
                    f" after {server.own_seconds_to_exit:.2f} s of its own time, {fleet.timeout:g} s"
                    " allowed"
                )
            elif not any(name in server.output for name in names):
                problems.append(
                    f"server {server.index} failed, but its output names neither {self.filename!r} nor"
                    f" {self.repo.repo_id!r}: whoever reads the log cannot tell what broke"
                )
        return problems


UNDECIDED = "UNDECIDED"


def _undecided(server: Server) -> str:
    return f"{UNDECIDED}: server {server.index}: {server.reason}"


def _accepts(expect: Callable[[Server], object], server: Server) -> bool:
    try:
        return bool(expect(server))
    except Exception:
        return False
