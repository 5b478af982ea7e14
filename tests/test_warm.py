"""Members forked from a warm template: launch(warm=True / preload=[...]), as users run it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from survivors import assert_none_alive, recorded_pids

ROOT = Path(__file__).resolve().parent.parent
CONFIG_SERVER = ROOT / "examples" / "servers" / "config_server.py"

COMMON = f"""
import json, os, re, sys, time
import pytest
from pytest_startup_guard import ready

CONFIG_SERVER = {str(CONFIG_SERVER)!r}
SERVER = [sys.executable, CONFIG_SERVER, "--model", "acme/tiny", "--port", "{{port}}"]
CONFIG = {{"config.json": {{"model_type": "gpt2", "n_layer": 3}}}}

def template_pid(fleet):
    found = re.search(r"forked from warm template pid (\\d+)", fleet.summary())
    assert found, fleet.summary()
    return int(found.group(1))

def record(fleet, *extra):
    '''Every pid of the fleet's trees and its template, for the outer test.'''
    import psutil
    pids = set(extra)
    for server in fleet.servers:
        pids |= fleet.members_pids(server)
        try:
            pids |= {{c.pid for c in psutil.Process(server.pid).children(recursive=True)}}
        except psutil.Error:
            pass
    with open(os.environ["FLEET_PIDS"], "a") as out:
        out.write("".join(f"{{pid}}\\n" for pid in pids))
"""

# A package the start-up imports at its top: each import of it leaves a line in IMPORTS.
HEAVY = """
import os
with open(os.environ["IMPORTS"], "a") as out:
    out.write(f"{os.getpid()}\\n")
"""

# A server that says, before its own imports, whether its stack was already imported, and
# which cache its huggingface_hub is pointed at; then reads its config from the test's cache.
HUB_SERVER = """
import sys
print("already imported:", "heavy" in sys.modules, flush=True)
import heavy
import huggingface_hub
from huggingface_hub import constants, hf_hub_download
print("hub cache:", constants.HF_HUB_CACHE, flush=True)
path = hf_hub_download("acme/tiny", "config.json")
print("read:", open(path).read(), flush=True)
import time
time.sleep(60)
"""

THREADED = """
import threading, time
threading.Thread(target=time.sleep, args=(60,), name="cache-warmer", daemon=True).start()
"""

LISTENING = """
import socket
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
"""


@pytest.fixture
def warm_pytester(
    guard_pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> pytest.Pytester:
    monkeypatch.delenv("STARTUP_GUARD_WARM", raising=False)
    monkeypatch.setenv("FLEET_PIDS", str(guard_pytester.path / "fleet-pids.txt"))
    monkeypatch.setenv("IMPORTS", str(guard_pytester.path / "imports.txt"))
    # The stack a server imports is installed, outside the test's project: a template
    # preloads no code of the project unless preload= names it.
    installed = tmp_path_factory.mktemp("installed")
    for name, text in {"heavy": HEAVY, "threaded": THREADED, "listening": LISTENING}.items():
        (installed / f"{name}.py").write_text(text)
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(installed), path]))
    guard_pytester.makepyfile(common=COMMON, hub_server=HUB_SERVER)
    guard_pytester.syspathinsert()
    return guard_pytester


def test_forked_config_servers_come_up_get_hit_and_die_as_cold_ones(
    warm_pytester: pytest.Pytester,
) -> None:
    warm_pytester.makepyfile(
        """
        from common import *

        def test_ready_and_hit(hub_cache, hub_race, server_fleet):
            repo = hub_cache.add_model("acme/tiny", CONFIG)
            hub_race.arm("pointer_swap", repo, "config.json")
            fleet = server_fleet.launch(
                SERVER + ["--policy", "retry"], count=2, ready=ready.http("/config"),
                preload=["transformers", "transformers.models.auto.configuration_auto"],
            )
            template = template_pid(fleet)
            record(fleet, template)
            fleet.assert_all_ready()
            pids = [server.pid for server in fleet.servers]
            assert len(set(pids)) == 2 and template not in pids
            for server in fleet.servers:
                assert os.getpgid(server.pid) == server.pid  # a process group of its own
                assert psutil_parent(server.pid) == template
                assert server.hits, "the race must hit a forked member"
                assert "serving gpt2 on http://127.0.0.1:%d" % server.port in server.output
            assert fleet.servers[0].output_path != fleet.servers[1].output_path
            fleet.stop()
            assert [s.returncode for s in fleet.servers] == [-15, -15]

        def psutil_parent(pid):
            import psutil
            return psutil.Process(pid).ppid()

        @pytest.mark.parametrize("warm", [False, True])
        def test_dies_as_cold(hub_cache, hub_race, server_fleet, warm):
            repo = hub_cache.add_model("acme/tiny", CONFIG)
            hub_race.arm("pointer_swap", repo, "config.json")
            fleet = server_fleet.launch(
                SERVER, count=1, ready=ready.http("/config"), warm=warm,
                preload=["transformers"] if warm else None,
            )
            record(fleet)
            server = fleet.servers[0]
            assert (server.state, server.returncode) == ("exited", 1), fleet.summary()
            assert "Traceback (most recent call last)" in server.output
            assert "warm/template.py" not in server.output and "runpy" not in server.output
            assert "server failed to start" in server.output
            with open(os.environ["FLEET_PIDS"] + f".reason-{warm}", "w") as out:
                out.write(server.report().split("output (last lines)")[0].split("\\n", 1)[1])
        """
    )
    result = warm_pytester.runpytest_subprocess("-p", "startup_guard", timeout=240)
    result.assert_outcomes(passed=3)
    base = Path(os.environ["FLEET_PIDS"])
    cold = Path(f"{base}.reason-False").read_text()
    warm = Path(f"{base}.reason-True").read_text()
    # The same verdict and reason, cold and warm (but the pid and the time, a process's own).
    assert "root cause" in cold and same_reason(cold) == same_reason(warm), (cold, warm)
    assert_none_alive(recorded_pids(warm_pytester))


def same_reason(report: str) -> str:
    """A member's report without what differs from one process to the next: pids and times."""
    return re.sub(r"\+\d+\.\d+ s", "+T s", re.sub(r"pid \d+", "pid N", report))


def test_probe_finds_the_imports_and_each_test_reads_its_own_cache(
    warm_pytester: pytest.Pytester,
) -> None:
    warm_pytester.makepyfile(
        """
        from common import *

        @pytest.mark.parametrize("n_layer", [3, 5])
        def test_own_cache(hub_cache, server_fleet, n_layer):
            hub_cache.add_model("acme/tiny", {"config.json": {"model_type": "gpt2", "n_layer": n_layer}})
            fleet = server_fleet.launch(
                [sys.executable, "hub_server.py"], count=2, ready=ready.log("^read:"), warm=True
            )
            record(fleet, template_pid(fleet))
            fleet.assert_all_ready()
            with open(os.environ["FLEET_PIDS"] + ".templates", "a") as out:
                out.write(f"{template_pid(fleet)}\\n")
            for server in fleet.servers:
                assert "already imported: True" in server.output
                assert f"hub cache: {hub_cache.hub_dir}" in server.output
                assert f'"n_layer": {n_layer}' in server.output
        """
    )
    result = warm_pytester.runpytest_subprocess("-p", "startup_guard", timeout=240)
    result.assert_outcomes(passed=2)
    templates = Path(os.environ["FLEET_PIDS"] + ".templates").read_text().split()
    assert len(templates) == 2 and len(set(templates)) == 1  # both tests forked from one
    # heavy was imported twice in the whole session: by the probe and by the template
    imports = Path(os.environ["IMPORTS"]).read_text().split()
    assert len(imports) == 2 and int(templates[0]) in map(int, imports)
    assert_none_alive(recorded_pids(warm_pytester))


def test_refusals_name_their_cause_and_or_cold_starts_cold(
    warm_pytester: pytest.Pytester,
) -> None:
    warm_pytester.makepyfile(
        """
        from common import *
        from pytest_startup_guard.errors import StartupGuardError

        CODE = "print('up', flush=True); import time; time.sleep(60)"

        @pytest.mark.parametrize(
            "argv, preload, cause",
            [
                ([sys.executable, "-c", CODE], ["threaded"], "thread(s) besides the main thread*'cache-warmer' (daemon)"),
                ([sys.executable, "-c", CODE], ["listening"], "open socket(s) every fork would share: fd * tcp 127.0.0.1:* (listening)"),
                (["/bin/sh", "-c", "echo up; sleep 60"], None, "'/bin/sh' is not a Python program*"),
                ([sys.executable, "-E", "-c", CODE], None, "the interpreter flag -E is not supported*"),
            ],
            ids=["thread", "socket", "not-python", "flag"],
        )
        def test_refused(server_fleet, argv, preload, cause):
            import fnmatch
            with pytest.raises(StartupGuardError) as raised:
                server_fleet.launch(argv, ready=ready.log("up"), warm=True, preload=preload)
            message = str(raised.value)
            assert fnmatch.fnmatch(message, "*cannot fork the members of*" + cause + "*"), message
            assert "warm='or_cold'" in message
            if preload:
                assert "template command: `" in message and "fleet.warm.template --serve" in message
            fleet = server_fleet.launch(argv, ready=ready.log("up"), warm="or_cold", preload=preload)
            record(fleet)
            fleet.assert_all_ready()
            assert "started cold (warm='or_cold'): " in fleet.summary()
            assert "forked from warm template" not in fleet.summary()

        def test_run_wide_option(server_fleet):
            fleet = server_fleet.launch([sys.executable, "-c", CODE], ready=ready.log("up"))
            record(fleet, template_pid(fleet))
            fleet.assert_all_ready()
            cold = server_fleet.launch([sys.executable, "-c", CODE], ready=ready.log("up"), warm=False)
            assert "warm template" not in cold.summary()
        """
    )
    result = warm_pytester.runpytest_subprocess(
        "-p", "startup_guard", "--startup-guard-warm=on", timeout=240
    )
    result.assert_outcomes(passed=5)
    assert_none_alive(recorded_pids(warm_pytester))


def test_kill_9_of_pytest_leaves_no_template_and_no_member(
    warm_pytester: pytest.Pytester,
) -> None:
    warm_pytester.makepyfile(
        """
        from common import *

        CODE = "print('up', flush=True); import time; time.sleep(300)"

        def test_killed(server_fleet):
            fleet = server_fleet.launch([sys.executable, "-c", CODE], count=2, ready=ready.log("up"), preload=["json"])
            record(fleet, template_pid(fleet))
            open(os.environ["FLEET_PIDS"] + ".launched", "w").close()
            time.sleep(300)
        """
    )
    marker = Path(os.environ["FLEET_PIDS"] + ".launched")
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "startup_guard", str(warm_pytester.path)],
        cwd=warm_pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and inner.poll() is None:
        time.sleep(0.1)
    assert marker.exists(), "the fleet never launched"
    pids = recorded_pids(warm_pytester)
    assert len(pids) >= 3  # two members and their template
    inner.send_signal(signal.SIGKILL)
    inner.wait()
    assert_none_alive(pids, within=30)


def test_a_template_command_names_its_modules(warm_pytester: pytest.Pytester) -> None:
    """The template's label is short: the last preloaded modules and how many more."""
    warm_pytester.makepyfile(
        """
        from common import *

        def test_label(server_fleet):
            fleet = server_fleet.launch([sys.executable, "-c", "print('up'); import time; time.sleep(9)"],
                                        ready=ready.log("up"), preload=["json", "csv", "email", "html", "ast"])
            record(fleet, template_pid(fleet))
            assert re.search(r"--serve \\(1 more\\) csv email html ast`", fleet.summary()), fleet.summary()
        """
    )
    warm_pytester.runpytest_subprocess("-p", "startup_guard").assert_outcomes(passed=1)
    assert_none_alive(recorded_pids(warm_pytester))


def test_a_setting_a_library_reads_at_import_gets_a_template_of_its_own(
    warm_pytester: pytest.Pytester,
) -> None:
    """``HF_HUB_ETAG_TIMEOUT`` is read by huggingface_hub once, at import: members launched
    with different values are forked from different templates, and each sees its own value, as
    a cold start would; the same value shares one template."""
    warm_pytester.makepyfile(
        """
        from common import *

        SERVER = [sys.executable, "-c",
                  "import time; from huggingface_hub import constants;"
                  " print('timeout', constants.HF_HUB_ETAG_TIMEOUT, flush=True); time.sleep(60)"]

        def test_settings(hub_cache, server_fleet):
            templates = {}
            for value in ("7", "9", "7"):
                fleet = server_fleet.launch(
                    SERVER, ready=ready.log("^timeout"), env={"HF_HUB_ETAG_TIMEOUT": value},
                    preload=["huggingface_hub"],
                )
                fleet.assert_all_ready()
                assert f"timeout {value}" in fleet.servers[0].output
                templates.setdefault(value, set()).add(template_pid(fleet))
                fleet.stop()
            assert len(templates["7"]) == 1 and templates["7"] != templates["9"]
        """
    )
    result = warm_pytester.runpytest_subprocess("-p", "startup_guard", timeout=240)
    result.assert_outcomes(passed=1)
