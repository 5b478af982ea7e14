"""A failure says which process met which change, where and when, then its exception; a member
whose read of the raced file was never seen is not judged, and never green.

Real servers load the tiny model of ``test_real_models.py`` (transformers, then safetensors'
Rust reader). A Rust loader's error names no file (``header too small``, ``No such file or
directory (os error 2)``): the root-cause line names it from the access that met the change.
"""

from __future__ import annotations

import pytest
from test_real_models import real_model, tiny_model_template  # noqa: F401 - fixtures used here

# A server that finds its weights as a loader written in Rust would: the revision from
# refs/main (Python), the path joined by hand, the file opened by safetensors in Rust only.
RUST_ONLY_SERVER = """
import http.server, os, sys, time
from safetensors.numpy import load_file

port, policy = int(sys.argv[1]), sys.argv[2]
folder = os.path.join(os.environ["HF_HUB_CACHE"], "models--acme--real")

def load():
    with open(os.path.join(folder, "refs", "main")) as ref:
        commit = ref.read().strip()
    return load_file(os.path.join(folder, "snapshots", commit, "model.safetensors"))

for attempt in range(8):
    try:
        weights = load()
        break
    except Exception as error:
        if policy == "naive" or attempt == 7:
            raise
        print(f"retrying after {type(error).__name__}: {error}", flush=True)
        time.sleep(0.05 * (attempt + 1))
print("loaded", sorted(weights), flush=True)

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def test_a_rust_loaders_failure_names_the_process_the_change_and_its_exception(
    real_model: pytest.Pytester,  # noqa: F811 - the fixture imported above
) -> None:
    """The naive model server under blob_rewrite on its weights (default trigger, native
    accesses: a rewrite in place is met by the read, which safetensors makes in Rust): each dies
    with safetensors' ``header too small``, which names no file; the failure says which pid met
    which change (model.safetensors empty or short), at which access and when, then that line."""
    real_model.makepyfile(
        """
        from common import *

        def test_fleet(hub_cache, hub_race, server_fleet):
            repo = add(hub_cache, "folder")
            hub_race.arm("blob_rewrite", repo, "model.safetensors")
            server_fleet.launch(
                SERVER + ["--policy", "naive"],
                count=2,
                ready=ready.http("/config"),
                native_accesses=True,  # the weights are read in Rust
            ).assert_all_ready()
        """
    )
    result = real_model.runpytest_subprocess("-p", "startup_guard", "-rA")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*root cause: pid * met blob_rewrite: model.safetensors empty or short (its blob"
            " truncated, not yet written back), at its * of snapshots/*/model.safetensors at +* s;"
            " then it failed: *SafetensorError: *header too small*",
        ]
    )


def test_a_member_whose_raced_read_was_never_seen_is_not_judged(
    real_model: pytest.Pytester,  # noqa: F811 - the fixture imported above
) -> None:
    """Weights opened only in Rust: without native accesses the read is never seen, so a
    retrying server that starts up is not counted as surviving: the case could not be judged,
    and says why. With native_accesses=True the same read is seen: the retrying server meets the
    change and passes, the naive one fails, its root cause naming the file its Rust error does
    not."""
    real_model.makepyfile(rust_only_server=RUST_ONLY_SERVER)
    real_model.makepyfile(
        """
        from common import *

        def launch(server_fleet, policy, native):
            command = [sys.executable, "rust_only_server.py", "{port}", policy]
            return server_fleet.launch(
                command, count=2, ready=ready.http("/"), native_accesses=native
            )

        @pytest.mark.startup_races(transient=["pointer_swap"])
        @pytest.mark.parametrize("native", [False, True])
        @pytest.mark.parametrize("policy", ["retry", "naive"])
        def test_weights(startup_case, hub_cache, server_fleet, policy, native):
            repo = add(hub_cache, "folder")
            startup_case.apply(repo, "model.safetensors")
            startup_case.check(launch(server_fleet, policy, native))
        """
    )
    result = real_model.runpytest_subprocess("-p", "startup_guard", "-rA")
    outcomes = {
        line.split("[", 1)[1].split("]")[0]: line.split(" ", 1)[0]
        for line in result.outlines
        if line.startswith(("PASSED ", "FAILED ")) and "test_weights[" in line
    }
    assert outcomes == {
        "transient-pointer_swap-retry-False": "FAILED",
        "transient-pointer_swap-naive-False": "FAILED",
        "transient-pointer_swap-retry-True": "PASSED",
        "transient-pointer_swap-naive-True": "FAILED",
    }, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*startup_case transient-pointer_swap on model.safetensors of acme/real@main: the"
            " start-up could not be judged, so it is not green:",
            "*server 0 (pid *) could not be judged: it started up, but was never seen to read"
            " model.safetensors, in a window or out of one, so whether it survived the race is"
            " not known and it is not counted as surviving (*native_accesses=True)*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*root cause: pid * met pointer_swap: model.safetensors gone (its pointer removed, not"
            " yet re-created), at its open of snapshots/*/model.safetensors at +* s; then it"
            " failed: *No such file or directory*",
        ]
    )
