"""Workers: every worker a server starts is judged; measured against the workers' own truth.

The three topologies of ``examples/servers/``, run as users run them (the commands of
``tests/test_workers.py``), each member with ``WORKERS`` workers on one shared socket:
``launcher_server.py --api-server-count N`` (a vLLM-style launcher, spawn), ``uvicorn
asgi_app:app --workers N`` (spawn) and ``gunicorn -w N -k sync wsgi_app:app`` (fork). One
pytest run (``-p startup_guard``, ``-n 2``, plugin autoloading off, ``--startup-guard-seed``)
holds every round: a parametrized test per kind of round, written into a scratch folder with a
conftest that, after each test's teardown, appends one JSON line to a results file: the
plugin's verdict (every phase's outcome and failure text) and everything the member and its
workers printed (the fleet's log files). This script reads those lines; the truth is the
processes' own output, never the plugin's verdict:

- launcher: ``started ApiServer_i (pid P)`` maps names to pids; a worker died when
  multiprocessing printed its traceback (``Process ApiServer_i:``) or the launcher logged it
  ended with a non-zero code or a signal;
- uvicorn (``--log-config`` puts each log line's pid in front, access log off): a worker died
  when it logged ``Application startup failed`` or its supervisor logged ``Child process [P]
  failed to start`` / ``died``;
- gunicorn (its default log format names the pid): ``Exception in worker process`` from the
  worker, or ``Worker (pid:P) exited with code N`` (N > 0) / ``was sent SIGKILL`` from the
  arbiter.

Figures:

a. chaos rounds, naive workers (``pointer_swap`` with ``chaos(gap=GAP, hold=HOLD)``, the
   workers read the config once): worker deaths caught / worker deaths, where a death is
   caught when a line of the plugin's failure (not the member output it quotes) names
   ``worker pid P``; rounds where a worker died and the test passed are missed;
b. the same chaos on retrying workers (``--retry``, ``RETRY=1``: 3 tries, 0.1 s then 0.2 s
   apart): false alarms, rounds the plugin failed while no worker died by the truth;
c. ``transient="all"`` at default settings (the deterministic ``on_access()``) on retrying
   workers of each topology: cases that survive, by the plugin's verdict and by the truth
   (every worker printed its loaded line, none died).

And the round time (launch to verdict, the test's call phase) per topology: median, p10-p90.
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import Figure, emit, figure, parse_args

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "examples" / "servers"
TOPOLOGIES = ("launcher", "uvicorn", "gunicorn")
WORKERS = 2  # per member: a start of 2 transformers workers is ~2-3 s on 2 cores, 4 are ~10 s
GAP = 0.05  # chaos: windows of ~HOLD every ~GAP (each jittered 0.5-1.5x by the round's seed)
HOLD = 0.02
FULL = {"naive": 34, "retry": 20, "transient": 1}  # rounds per topology
QUICK = {"naive": 1, "retry": 1, "transient": 1}  # quick: transient is one race per topology
QUICK_RACES = ("pointer_swap", "ref_rewrite", "dangling_pointer")  # one per topology

# uvicorn's default log lines carry no pid: the same handlers with the pid in front.
UVICORN_LOG_CONFIG = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"pid": {"format": "[%(process)d] %(levelname)s: %(message)s"}},
    "handlers": {
        "default": {
            "class": "logging.StreamHandler",
            "formatter": "pid",
            "stream": "ext://sys.stderr",
        }
    },
    "loggers": {
        "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
        "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
    },
}

CONFTEST = '''
"""After each test's teardown: one JSON line, the plugin's verdict and the member's output."""
import json
import os
from pathlib import Path

import pytest

PHASES = pytest.StashKey[dict]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    phases = item.stash.setdefault(PHASES, {})
    phases[report.when] = {
        "outcome": report.outcome, "text": report.longreprtext, "seconds": report.duration,
    }
    if report.when == "setup" and item.funcargs:
        phases["tmp"] = str(item.funcargs.get("tmp_path", ""))
    if report.when != "teardown":
        return
    tmp = phases.pop("tmp", "")
    logs = sorted(Path(tmp).glob("startup-guard-fleet/*/server-*.log")) if tmp else []
    line = {
        "nodeid": item.nodeid,
        "phases": phases,
        "output": "\\n".join(path.read_text(errors="replace") for path in logs),
    }
    with open(os.environ["WORKERS_BENCH_RESULTS"], "a") as results:
        results.write(json.dumps(line) + "\\n")
'''

TESTS = """
import sys
from pathlib import Path

import pytest

from pytest_startup_guard import chaos, ready

SERVERS = Path({servers!r})
BIN = Path(sys.executable).parent
WORKERS = {workers!r}
COMMANDS = {{
    "launcher": [
        sys.executable, str(SERVERS / "launcher_server.py"), "--port", "{{port}}",
        "--repo", "acme/tiny", "--api-server-count", str(WORKERS),
    ],
    "uvicorn": [
        str(BIN / "uvicorn"), "asgi_app:app", "--app-dir", str(SERVERS), "--host", "127.0.0.1",
        "--port", "{{port}}", "--workers", str(WORKERS), "--log-config", {log_config!r},
    ],
    "gunicorn": [
        str(BIN / "gunicorn"), "-w", str(WORKERS), "-k", "sync", "--no-control-socket",
        "--chdir", str(SERVERS), "-b", "127.0.0.1:{{port}}", "wsgi_app:app",
    ],
}}
RETRY_FLAG = {{"launcher": ["--retry"], "uvicorn": [], "gunicorn": []}}


def add_repo(hub_cache):
    return hub_cache.add_model("acme/tiny", {{"config.json": {{"model_type": "gpt2"}}}})


def launch(server_fleet, topology, retry):
    return server_fleet.launch(
        COMMANDS[topology] + (RETRY_FLAG[topology] if retry else []),
        count=1,
        workers=WORKERS,
        ready=ready.http("/health"),
        env={{"REPO_ID": "acme/tiny", "RETRY": "1" if retry else "0"}},
    )


@pytest.mark.parametrize(("policy", "topology", "round"), {chaos_rounds!r})
def test_chaos(hub_cache, hub_race, server_fleet, policy, topology, round):
    repo = add_repo(hub_cache)
    hub_race.arm(
        "pointer_swap", repo, "config.json", trigger=chaos(gap={gap!r}, hold={hold!r}),
        allow_miss=True,
    )
    launch(server_fleet, topology, policy == "retry").assert_all_ready()
"""

TRANSIENT_TEST = """

@pytest.mark.startup_races(transient={races!r})
@pytest.mark.parametrize("round", range({rounds!r}))
def test_transient_{topology}(startup_case, hub_cache, server_fleet, round):
    repo = add_repo(hub_cache)
    startup_case.apply(repo, "config.json")
    startup_case.check(launch(server_fleet, {topology!r}, retry=True))
"""

# The truth, from what the processes printed (see the module's docstring).
LAUNCHER_STARTED = re.compile(r"started (ApiServer_\d+) \(pid (\d+)\)")
LAUNCHER_TRACEBACK = re.compile(r"^Process (ApiServer_\d+):$", re.MULTILINE)
LAUNCHER_ENDED = re.compile(
    r"(ApiServer_\d+) \(pid (\d+)\) (?:exited with code [1-9]\d*|was killed by \w+)"
)
LAUNCHER_LOADED = re.compile(r"API server \d+ \(pid (\d+)\) serving")
UVICORN_STARTED = re.compile(r"\[(\d+)\] INFO: Started server process")
UVICORN_FAILED = re.compile(r"\[(\d+)\] ERROR: Application startup failed")
UVICORN_SUPERVISOR = re.compile(r"Child process \[(\d+)\] (?:failed to start|died)")
GUNICORN_STARTED = re.compile(r"Booting worker with pid: (\d+)")
GUNICORN_FAILED = re.compile(r"\[(\d+)\] \[ERROR\] Exception in worker process")
GUNICORN_SUPERVISOR = re.compile(
    r"Worker \(pid:(\d+)\) (?:exited with code [1-9]\d*|was sent SIGKILL)"
)
APP_LOADED = re.compile(r"^worker pid (\d+) loaded", re.MULTILINE)
# The plugin's failure names a failed worker: "worker pid P exited with code 3 after 4.38 s
# (FAILED...)", "root cause: worker pid P: ..." (the member output it quotes starts with "|").
NAMED = re.compile(r"\bworker pid (\d+) [^\n]*\(FAILED|root cause: worker pid (\d+)")


@dataclass
class Truth:
    started: set[int] = field(default_factory=set)
    loaded: set[int] = field(default_factory=set)
    died: set[int] = field(default_factory=set)


def pids(pattern: re.Pattern[str], text: str, group: int = 1) -> set[int]:
    """The pids ``pattern`` finds in ``text``: its ``group``, or its first group that matched."""
    found = set()
    for match in pattern.finditer(text):
        value = match.group(group) or next(g for g in match.groups() if g is not None)
        found.add(int(value))
    return found


def truth_of(topology: str, output: str) -> Truth:
    """Which workers started, loaded their config and died, by their own and their
    supervisor's output."""
    if topology == "launcher":
        names = {name: int(pid) for name, pid in LAUNCHER_STARTED.findall(output)}
        died = {names[name] for name in LAUNCHER_TRACEBACK.findall(output) if name in names}
        return Truth(
            set(names.values()),
            pids(LAUNCHER_LOADED, output),
            died | pids(LAUNCHER_ENDED, output, 2),
        )
    if topology == "uvicorn":
        return Truth(
            pids(UVICORN_STARTED, output),
            pids(APP_LOADED, output),
            pids(UVICORN_FAILED, output) | pids(UVICORN_SUPERVISOR, output),
        )
    return Truth(
        pids(GUNICORN_STARTED, output),
        pids(APP_LOADED, output),
        pids(GUNICORN_FAILED, output) | pids(GUNICORN_SUPERVISOR, output),
    )


@dataclass
class Round:
    nodeid: str
    kind: str  # naive, retry (chaos rounds) or transient
    topology: str
    failed: bool  # the plugin's verdict: some phase of the test failed
    named: set[int]  # the worker pids the plugin's failure names
    truth: Truth
    seconds: float  # the call phase: launch to verdict

    @property
    def caught(self) -> set[int]:
        return self.truth.died & self.named


def plugin_text(phases: dict[str, dict[str, object]]) -> str:
    """The failure text of every failed phase, without the member output it quotes."""
    lines = []
    for phase in phases.values():
        if phase["outcome"] == "failed":
            for line in str(phase["text"]).splitlines():
                stripped = re.sub(r"^E\s+", "", line.strip())
                if not stripped.startswith("|"):
                    lines.append(stripped)
    return "\n".join(lines)


def parse_round(line: dict[str, object]) -> Round:
    nodeid = str(line["nodeid"])
    phases: dict[str, dict[str, object]] = line["phases"]  # type: ignore[assignment]
    if "::test_chaos[" in nodeid:
        kind, topology = re.findall(r"\[(naive|retry)-(\w+)-\d+\]", nodeid)[0]
    else:
        kind, topology = "transient", nodeid.split("::test_transient_")[1].split("[")[0]
    failed = any(phase["outcome"] == "failed" for phase in phases.values())
    call = phases.get("call", {})
    return Round(
        nodeid,
        kind,
        topology,
        failed,
        pids(NAMED, plugin_text(phases)),
        truth_of(topology, str(line["output"])),
        float(call.get("seconds", 0.0)),  # type: ignore[arg-type]
    )


def write_suite(folder: Path, sizes: dict[str, int], quick: bool) -> None:
    log_config = folder / "uvicorn-log.json"
    log_config.write_text(json.dumps(UVICORN_LOG_CONFIG))
    chaos_rounds = [
        (policy, topology, number)
        for number in range(max(sizes["naive"], sizes["retry"]))
        for policy in ("naive", "retry")
        if number < sizes[policy]
        for topology in TOPOLOGIES
    ]
    tests = TESTS.format(
        servers=str(SERVERS),
        workers=WORKERS,
        log_config=str(log_config),
        chaos_rounds=chaos_rounds,
        gap=GAP,
        hold=HOLD,
    )
    for index, topology in enumerate(TOPOLOGIES if sizes["transient"] else ()):
        races: str | list[str] = [QUICK_RACES[index]] if quick else "all"
        tests += TRANSIENT_TEST.format(races=races, rounds=sizes["transient"], topology=topology)
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_worker_rounds.py").write_text(tests)


def run_rounds(folder: Path, sizes: dict[str, int], quick: bool, seed: int) -> list[Round]:
    write_suite(folder, sizes, quick)
    results = folder / "rounds.jsonl"
    env = {key: value for key, value in os.environ.items() if not key.startswith("STARTUP_GUARD")}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", WORKERS_BENCH_RESULTS=str(results))
    command = [
        sys.executable, "-m", "pytest", "-p", "startup_guard", "-p", "xdist", "-n", "2",
        "-p", "no:cacheprovider", "-q", f"--startup-guard-seed={seed}",
        f"--basetemp={folder / 'tmp'}", "test_worker_rounds.py",
    ]  # fmt: skip
    subprocess.run(
        command,
        cwd=folder,
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    if not results.exists():
        raise SystemExit(f"no round reported: run {' '.join(command)} in {folder}")
    return [parse_round(json.loads(line)) for line in results.read_text().splitlines()]


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f} s" if values else "-"
    ordered = sorted(values)
    low = ordered[round(0.1 * (len(ordered) - 1))]
    high = ordered[round(0.9 * (len(ordered) - 1))]
    return f"{statistics.median(ordered):.2f} s (p10-p90 {low:.2f}-{high:.2f})"


def replay(seed: int, rounds: list[Round]) -> str:
    return "; ".join(f"--startup-guard-seed={seed} '{r.nodeid}'" for r in rounds[:3])


def main() -> None:
    args = parse_args(__doc__ or "")
    sizes = QUICK if args.quick else FULL
    seed = int(os.environ.get("STARTUP_GUARD_SEED") or random.SystemRandom().randrange(2**32))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as folder:
        rounds = run_rounds(Path(folder), sizes, args.quick, seed)
    wall = time.perf_counter() - started
    setting = f"{WORKERS} workers a member, chaos(gap={GAP}, hold={HOLD}), seed {seed}"

    naive = [r for r in rounds if r.kind == "naive"]
    deaths = sum(len(r.truth.died) for r in naive)
    caught = sum(len(r.caught) for r in naive)
    missed = [r for r in naive if r.truth.died - r.named]
    per_topology = ", ".join(
        f"{t} {sum(len(r.caught) for r in naive if r.topology == t)}"
        f"/{sum(len(r.truth.died) for r in naive if r.topology == t)}"
        for t in TOPOLOGIES
    )
    with_death = sum(1 for r in naive if r.truth.died)
    extra = sum(len(r.named - r.truth.died) for r in naive)
    naive_alarms = [r for r in naive if r.failed and not r.truth.died]
    want_deaths = 0 if args.quick else 30
    want_rounds = 0 if args.quick else 100

    retry = [r for r in rounds if r.kind == "retry"]
    alarms = [r for r in retry if r.failed and not r.truth.died]
    retry_deaths = [r for r in retry if r.truth.died]
    retry_missed = [r for r in retry if r.truth.died - r.named]

    transient = [r for r in rounds if r.kind == "transient"]
    survived = [
        r for r in transient if not r.failed and not r.truth.died and len(r.truth.loaded) >= WORKERS
    ]
    by_truth = sum(1 for r in transient if not r.truth.died and len(r.truth.loaded) >= WORKERS)
    by_plugin = sum(1 for r in transient if not r.failed)
    survival = 100.0 * len(survived) / len(transient) if transient else 0.0

    figures: list[Figure] = [
        figure(
            "workers: deaths caught under chaos, naive workers",
            100.0 * caught / deaths if deaths else 100.0,
            "%",
            target="100 %" + (", >= 30 deaths" if want_deaths else ""),
            passed=caught == deaths and deaths >= want_deaths and len(naive) >= want_rounds,
            detail=f"{caught}/{deaths} deaths named in {len(naive)} rounds ({with_death} with a"
            f" death; {per_topology}); missed: {replay(seed, missed) or 'none'}; pids named that"
            f" did not die by the truth: {extra}; rounds failed with no death: "
            f"{len(naive_alarms)}; {setting}",
        ),
        figure(
            f"workers: false alarms in {len(retry)} chaos rounds of retrying workers",
            len(alarms),
            "rounds",
            target="0",
            passed=not alarms,
            detail=f"{replay(seed, alarms) or 'none'}; rounds where a retrying worker still died"
            f" (by the truth): {len(retry_deaths)}, its death named in"
            f" {len(retry_deaths) - len(retry_missed)}; {setting}",
        ),
        figure(
            f"workers: transient='all' cases survived by retrying workers ({len(transient)})",
            survival,
            "%",
            target="100 %",
            passed=bool(transient) and len(survived) == len(transient),
            detail=f"{len(survived)}/{len(transient)}; by the plugin's verdict {by_plugin}, by the"
            f" truth (every worker loaded, none died) {by_truth};"
            f" failed: {replay(seed, [r for r in transient if r not in survived]) or 'none'}",
        ),
    ]
    for topology in TOPOLOGIES:
        times = [r.seconds for r in rounds if r.topology == topology and r.kind != "transient"]
        figures.append(
            figure(
                f"workers: chaos round, {topology} with {WORKERS} workers (launch to verdict)",
                statistics.median(times) if times else 0.0,
                "s",
                detail=f"{spread(times)} over {len(times)} rounds",
            )
        )
    for label, odd in (
        ("missed death", missed + retry_missed),
        ("false alarm", naive_alarms + alarms),
    ):
        for r in odd:
            print(
                f"{label}: --startup-guard-seed={seed} '{r.nodeid}': died {sorted(r.truth.died)},"
                f" named {sorted(r.named)}, loaded {sorted(r.truth.loaded)}"
            )
    print(f"{len(rounds)} rounds in {wall:.0f} s (pytest -n 2, {setting})")
    emit(figures, args)


if __name__ == "__main__":
    main()
