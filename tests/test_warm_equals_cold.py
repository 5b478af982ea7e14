"""Warm equals cold, or refused (issue 41): start-ups built to break a fork's equivalence.

Each case is launched as a user launches it, cold and warm (``warm=True``: the probe finds the
imports; ``preload=[...]``: the user names them; ``warm="or_cold"``), and each warm launch must
give the verdict the cold one gives, or be refused with a message that names the cause: the
module, and the variable, the argument, the draw or the address. A verdict is what the fleet
really did (ready or not, each member's exit), never what the plugin says of itself.

The modules a server imports come from two places, as in a real project: the test's own project
(its rootdir: the server's own modules) and an installed package (a folder outside the rootdir on
``PYTHONPATH``, standing for site-packages).
"""

from __future__ import annotations

import json
import os

import pytest
from survivors import assert_none_alive, recorded_pids

RECORD = """
import json, os, sys
import pytest
from pytest_startup_guard import ready
from pytest_startup_guard.errors import StartupGuardError

FORKED = "forked from warm template"

def launch(server_fleet, mode, argv, preload, **options):
    '''Launch as ``mode`` asks; record how it started and the verdict: what the members did.'''
    warm = {"cold": {"warm": False}, "warm": {"warm": True}, "or_cold": {"warm": "or_cold"},
            "preload": {"preload": preload}}[mode]
    entry = {"mode": mode}
    try:
        fleet = server_fleet.launch(argv, **options, **warm)
    except StartupGuardError as refusal:
        entry.update(started="refused", message=str(refusal))
        return write(entry)
    summary = fleet.summary()
    entry["started"] = "forked" if FORKED in summary else "cold"
    entry["cold_line"] = [l.strip() for l in summary.splitlines() if "started cold" in l]
    entry["states"] = sorted(server.state for server in fleet.servers)
    entry["outputs"] = [server.output[:300] + " ... " + server.output[-300:] for server in fleet.servers]
    pids = set()
    for server in fleet.servers:
        pids |= fleet.members_pids(server)
    with open(os.environ["FLEET_PIDS"], "a") as out:
        out.write("".join(f"{pid}\\n" for pid in pids))
    fleet.stop()
    write(entry)

def write(entry):
    with open(os.environ["VERDICTS"], "a") as out:
        out.write(json.dumps(entry) + "\\n")
"""

# Installed packages (outside the rootdir), each doing at import what real libraries do.
INSTALLED = {
    # a settings module that keeps the cache folder it was imported under (as
    # text-generation-inference's does)
    "hubsettings.py": """
import os
HUB_CACHE = os.environ.get("HF_HUB_CACHE") or os.path.join(os.environ["HF_HOME"], "hub")
""",
    # a scratch folder named by an id drawn at import
    "scratch_uuid.py": """
import os, uuid
FOLDER = os.path.join(os.environ["SCRATCH_ROOT"], uuid.uuid4().hex)
""",
    "scratch_random.py": """
import os, random
FOLDER = os.path.join(os.environ["SCRATCH_ROOT"], "run-%d" % random.getrandbits(64))
""",
    "scratch_urandom.py": """
import os
FOLDER = os.path.join(os.environ["SCRATCH_ROOT"], os.urandom(8).hex())
""",
    "scratch_clock.py": """
import os, time
FOLDER = os.path.join(os.environ["SCRATCH_ROOT"], "run-%d" % time.time_ns())
""",
    # a setting read at import, which the server itself sets before it imports it
    "modeflag.py": """
import os
MODE = os.environ.get("SERVER_MODE", "retry")
""",
    # a setting read from the cache at import: a file's content, or only whether a folder exists
    "hubmode_read.py": """
from huggingface_hub import try_to_load_from_cache
found = try_to_load_from_cache("acme/tiny", "mode.txt")
MODE = open(found).read().strip() if isinstance(found, str) else "retry"
""",
    "hubmode_look.py": """
import os
from huggingface_hub import constants
MODE = "naive" if os.path.isdir(os.path.join(constants.HF_HUB_CACHE, "models--acme--tiny")) else "retry"
""",
    # nothing at import: a library a start-up imports after its first read of the cache
    "late_lib.py": """
VALUE = 1
""",
    # a library that starts a thread at import: a template that imported it cannot be forked
    "late_thread.py": """
import threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
""",
    # telemetry that opens its sockets at import
    "telemetry.py": """
import socket
unbound = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
reporter = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
reporter.connect(("127.0.0.1", 9))
""",
}

# The test's own project: a settings module that parses the command line at import.
PROJECT = {
    "settings.py": """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--policy", default="retry")
parser.add_argument("--port", type=int)
POLICY = parser.parse_known_args()[0].policy
""",
    # reads its config through the settings module's policy: naive dies of a swapped pointer
    "argv_server.py": """
import sys, time
import settings
from huggingface_hub import hf_hub_download
print("policy", settings.POLICY, flush=True)
for attempt in range(20 if settings.POLICY == "retry" else 1):
    try:
        path = hf_hub_download("acme/tiny", "config.json")
        open(path).read()
        break
    except Exception:
        if settings.POLICY != "retry" or attempt == 19:
            raise
        time.sleep(0.05)
print("up", flush=True)
time.sleep(60)
""",
    # reads its config under the cache folder its settings module kept
    "settings_server.py": """
import time
import hubsettings
from huggingface_hub import hf_hub_download
path = hf_hub_download("acme/tiny", "config.json", cache_dir=hubsettings.HUB_CACHE)
print("read", open(path).read(), flush=True)
print("up", flush=True)
time.sleep(60)
""",
    # takes its policy from a module: one whose setting it sets itself first (env), or one that
    # reads the cache at import, imported after a first read of the cache
    "mode_server.py": """
import importlib, os, sys, time
from huggingface_hub import hf_hub_download
if sys.argv[1] == "env":
    os.environ["SERVER_MODE"] = "naive"
    import modeflag as source
else:
    open(hf_hub_download("acme/tiny", "other.json")).read()
    source = importlib.import_module(sys.argv[1])
print("mode", source.MODE, flush=True)
for attempt in range(20 if source.MODE == "retry" else 1):
    try:
        open(hf_hub_download("acme/tiny", "config.json")).read()
        break
    except Exception:
        if source.MODE != "retry" or attempt == 19:
            raise
        time.sleep(0.05)
print("up", flush=True)
time.sleep(60)
""",
    # makes a file of its own, once (a pid file): before or after its first read of the cache
    "pidfile_server.py": """
import os, sys, time
from huggingface_hub import hf_hub_download
def mark():
    os.close(os.open("ran-%s.pid" % sys.argv[2], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
if sys.argv[1] == "before":
    mark()
open(hf_hub_download("acme/tiny", "config.json")).read()
if sys.argv[1] == "after":
    mark()
print("up", flush=True)
time.sleep(60)
""",
    # says whether a library it imports after its first read of the cache was there already
    "late_server.py": """
import importlib, sys, time
from huggingface_hub import hf_hub_download
library = sys.argv[1]
preloaded = library in sys.modules
open(hf_hub_download("acme/tiny", "config.json")).read()
importlib.import_module(library)
print(library, "preloaded", preloaded, flush=True)
print("up", flush=True)
time.sleep(60)
""",
    # makes the scratch folder its module named at import: a second one of the same name fails
    "scratch_server.py": """
import importlib, os, sys, time
scratch = importlib.import_module(sys.argv[1])
os.makedirs(scratch.FOLDER)
print("scratch", scratch.FOLDER, flush=True)
print("up", flush=True)
time.sleep(60)
""",
}


@pytest.fixture
def cases(
    guard_pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> pytest.Pytester:
    installed = tmp_path_factory.mktemp("site-packages")
    for name, text in INSTALLED.items():
        (installed / name).write_text(text)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(installed), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.setenv("FLEET_PIDS", str(guard_pytester.path / "fleet-pids.txt"))
    monkeypatch.setenv("VERDICTS", str(guard_pytester.path / "verdicts.jsonl"))
    monkeypatch.delenv("STARTUP_GUARD_WARM", raising=False)
    guard_pytester.makepyfile(record=RECORD, **{k[:-3]: v for k, v in PROJECT.items()})
    guard_pytester.syspathinsert()
    return guard_pytester


def run(cases: pytest.Pytester, test: str) -> dict[str, dict[str, object]]:
    cases.makepyfile(test_cases="from record import *\n" + test)
    result = cases.runpytest_subprocess(
        "-p", "startup_guard", "-p", "no:cacheprovider", timeout=300
    )
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    verdicts = {}
    for line in (cases.path / "verdicts.jsonl").read_text().splitlines():
        entry = json.loads(line)
        verdicts[entry.pop("mode")] = entry
    assert_none_alive(recorded_pids(cases))
    return verdicts


def same_or_refused(verdicts: dict[str, dict[str, object]], mode: str, *named: str) -> None:
    """``mode``'s launch gave the cold verdict, or was refused naming every word of ``named``."""
    cold, warm = verdicts["cold"], verdicts[mode]
    assert cold["started"] == "cold"
    if warm["started"] == "refused":
        message = str(warm["message"])
        for word in named:
            assert word in message, (word, message)
        return
    assert warm["states"] == cold["states"], (mode, warm, cold)


def test_a_module_that_parses_argv_at_import(cases: pytest.Pytester) -> None:
    """The server's own settings module parses ``--policy naive``: cold, the swapped pointer
    kills it. Warm, the project's module is not preloaded (the members parse their own argv);
    preloaded by name, the launch is refused naming the module and ``sys.argv``."""
    verdicts = run(
        cases,
        """
PRELOAD = ["huggingface_hub", "settings"]

@pytest.mark.parametrize("mode", ["cold", "warm", "preload"])
def test_policy(mode, hub_cache, hub_race, server_fleet):
    repo = hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    hub_race.arm("pointer_swap", repo, "config.json")
    launch(server_fleet, mode, [sys.executable, "argv_server.py", "--port", "{port}", "--policy", "naive"],
           PRELOAD, count=2, ready=ready.log("^up"))
""",
    )
    assert verdicts["cold"]["states"] == ["exited", "exited"], verdicts["cold"]
    assert verdicts["warm"]["started"] == "forked", verdicts["warm"]
    for output in verdicts["warm"]["outputs"]:
        assert "policy naive" in str(output)
    same_or_refused(verdicts, "warm")
    assert verdicts["preload"]["started"] == "refused", verdicts["preload"]
    same_or_refused(verdicts, "preload", "'settings'", "sys.argv", "settings.py:")


def test_a_settings_module_that_keeps_the_cache_folder(cases: pytest.Pytester) -> None:
    """An installed settings module keeps ``HF_HUB_CACHE`` at import: forked, it would keep the
    template's empty cache. Refused, naming the module and the variable; ``or_cold`` says so."""
    verdicts = run(
        cases,
        """
PRELOAD = ["hubsettings", "huggingface_hub"]

@pytest.mark.parametrize("mode", ["cold", "warm", "preload", "or_cold"])
def test_settings(mode, hub_cache, server_fleet):
    hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2"}})
    launch(server_fleet, mode, [sys.executable, "settings_server.py"], PRELOAD, count=2, ready=ready.log("^up"))
""",
    )
    assert verdicts["cold"]["states"] == ["ready", "ready"], verdicts["cold"]
    for mode in ("warm", "preload"):
        same_or_refused(verdicts, mode, "'hubsettings'", "HF_HUB_CACHE")
        assert verdicts[mode]["started"] == "refused", verdicts[mode]
    or_cold = verdicts["or_cold"]
    assert or_cold["started"] == "cold" and or_cold["states"] == ["ready", "ready"], or_cold
    assert "'hubsettings'" in str(or_cold["cold_line"]) and "HF_HUB_CACHE" in str(
        or_cold["cold_line"]
    )


@pytest.mark.parametrize(
    ("module", "draw"),
    [
        ("scratch_uuid", "uuid.uuid4"),
        ("scratch_random", "random.getrandbits"),
        ("scratch_urandom", "os.urandom"),
        ("scratch_clock", "time.time_ns"),
    ],
)
def test_an_id_drawn_at_import(cases: pytest.Pytester, module: str, draw: str) -> None:
    """A scratch folder named by an id drawn at import: cold, each member draws its own; forked,
    both would make the template's and one die of FileExistsError. Refused, naming the module
    and the draw."""
    verdicts = run(
        cases,
        f"""
PRELOAD = [{module!r}]

@pytest.mark.parametrize("mode", ["cold", "warm", "preload", "or_cold"])
def test_scratch(mode, server_fleet, tmp_path):
    launch(server_fleet, mode, [sys.executable, "scratch_server.py", {module!r}], PRELOAD, count=2,
           ready=ready.log("^up"), env={{"SCRATCH_ROOT": str(tmp_path)}})
""",
    )
    assert verdicts["cold"]["states"] == ["ready", "ready"], verdicts["cold"]
    for mode in ("warm", "preload"):
        same_or_refused(verdicts, mode, f"'{module}'", draw, f"{module}.py:")
    or_cold = verdicts["or_cold"]
    assert or_cold["states"] == ["ready", "ready"], or_cold


def test_sockets_made_at_import_are_named_by_module_and_address(cases: pytest.Pytester) -> None:
    verdicts = run(
        cases,
        """
PRELOAD = ["telemetry"]

@pytest.mark.parametrize("mode", ["cold", "preload"])
def test_sockets(mode, server_fleet):
    launch(server_fleet, mode, [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
           PRELOAD, ready=ready.log("^up"))
""",
    )
    refused = verdicts["preload"]
    assert refused["started"] == "refused", refused
    message = str(refused["message"])
    assert "'telemetry'" in message and "telemetry.py:" in message, message
    assert "connected to 127.0.0.1:9" in message and "not bound" in message, message
    assert "socket:[" not in message, message


def test_an_installed_module_that_reads_only_its_own_settings_is_forked(
    cases: pytest.Pytester,
) -> None:
    """The control: what the libraries themselves read at import (transformers draws a session
    id, tqdm loops over the environment, numpy seeds its generator) does not refuse a launch."""
    verdicts = run(
        cases,
        """
PRELOAD = ["transformers", "numpy.random"]
CODE = ("import numpy, transformers.utils.hub as hub; print('seed', numpy.random.randint(1 << 30), 'session', hub.SESSION_ID, flush=True);"
        "print('up', flush=True); import time; time.sleep(60)")

@pytest.mark.parametrize("mode", ["cold", "preload"])
def test_libraries(mode, server_fleet):
    launch(server_fleet, mode, [sys.executable, "-c", CODE], PRELOAD, count=2, ready=ready.log("^up"))
""",
    )
    forked = verdicts["preload"]
    assert forked["started"] == "forked", forked
    assert forked["states"] == verdicts["cold"]["states"] == ["ready", "ready"]
    seeds = [str(output).split("seed ", 1)[1].split()[0] for output in forked["outputs"]]
    sessions = [str(output).split("session ", 1)[1].split()[0] for output in forked["outputs"]]
    assert len(set(seeds)) == 2 and len(set(sessions)) == 2, forked["outputs"]


MODE_MODEL = """
    repo = hub_cache.add_model(
        "acme/tiny",
        {"config.json": {"model_type": "gpt2"}, "other.json": {"other": 1}, "mode.txt": "naive"},
    )
"""


@pytest.mark.parametrize("setting", ["env", "hubmode_read", "hubmode_look"])
def test_a_policy_a_fork_would_take_from_the_template(cases: pytest.Pytester, setting: str) -> None:
    """The server's policy comes from a module that a template would import unlike a cold start:
    one whose variable the server sets itself before importing it (the template imports with
    the members' environment), or one imported after the first read of the cache that reads the
    cache at import (the template's is empty). Cold, the policy is naive and the swapped pointer
    kills both members; warm, the probe leaves that module to the members: the same verdict."""
    verdicts = run(
        cases,
        f"""
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_policy(mode, hub_cache, hub_race, server_fleet):
{MODE_MODEL}
    hub_race.arm("pointer_swap", repo, "config.json")
    launch(server_fleet, mode, [sys.executable, "mode_server.py", {setting!r}], [], count=2,
           ready=ready.log("^up"))
""",
    )
    assert verdicts["cold"]["states"] == ["exited", "exited"], verdicts["cold"]
    assert verdicts["warm"]["started"] == "forked", verdicts["warm"]
    for output in verdicts["warm"]["outputs"]:
        assert "mode naive" in str(output), verdicts["warm"]
    same_or_refused(verdicts, "warm")


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_file_the_start_up_makes_once(cases: pytest.Pytester, where: str) -> None:
    """Each member makes a file of its own that must not exist yet (a pid file), before or after
    its first read of the cache: the probe that finds what a template preloads stops before the
    program changes a file outside its private cache, so no member finds its file made."""
    verdicts = run(
        cases,
        f"""
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_pidfile(mode, hub_cache, server_fleet, tmp_path):
    hub_cache.add_model("acme/tiny", {{"config.json": {{"model_type": "gpt2"}}}})
    launch(server_fleet, mode, [sys.executable, "pidfile_server.py", {where!r}, "%s-{{port}}" % mode],
           [], count=2, ready=ready.log("^up"))
""",
    )
    assert verdicts["cold"]["states"] == ["ready", "ready"], verdicts["cold"]
    assert verdicts["warm"]["started"] == "forked", verdicts["warm"]
    same_or_refused(verdicts, "warm")


@pytest.mark.parametrize(("library", "preloaded"), [("late_lib", True), ("late_thread", False)])
def test_what_a_start_up_imports_after_its_first_read_is_preloaded(
    cases: pytest.Pytester, library: str, preloaded: bool
) -> None:
    """The probe goes on past the first read of the cache, in a clone of it: a library the
    start-up imports after that read is in the template, and each forked member finds it
    there (a cold one imports it itself). One that starts a thread at import cannot be in a
    template: the members are forked from the template of what came before that read."""
    verdicts = run(
        cases,
        f"""
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_late(mode, hub_cache, server_fleet):
    hub_cache.add_model("acme/tiny", {{"config.json": {{"model_type": "gpt2"}}}})
    launch(server_fleet, mode, [sys.executable, "late_server.py", {library!r}], [], count=2,
           ready=ready.log("^up"))
""",
    )
    assert verdicts["cold"]["states"] == verdicts["warm"]["states"] == ["ready", "ready"]
    assert verdicts["warm"]["started"] == "forked", verdicts["warm"]
    for output in verdicts["cold"]["outputs"]:
        assert f"{library} preloaded False" in str(output), verdicts["cold"]
    for output in verdicts["warm"]["outputs"]:
        assert f"{library} preloaded {preloaded}" in str(output), verdicts["warm"]
