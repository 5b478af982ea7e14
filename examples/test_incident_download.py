"""Two downloads of one file into a cold cache: the real huggingface_hub, paused at each step.

    pytest -p startup_guard examples/test_incident_download.py

huggingface/huggingface_hub#1108 and #1133 (flaky in transformers' own CI): two processes run
``hf_hub_download`` of the same file at once. huggingface_hub 0.10.0 removes the file's pointer,
then makes its ``os.symlink``; a process that makes the pointer between the two kills the other
with ``FileExistsError``. ``hub_remote`` serves the repo on loopback; ``hub_remote.writer`` runs
that release's ``hf_hub_download`` as a helper process (the release comes from
``.venv/hub-releases/0.10.0``, which ``make test`` installs: found relative to ``sys.prefix``);
``server_fleet.explore_writer`` pauses it after each of its steps while a server that downloads
the same file (the installed huggingface_hub) starts up against what it left.

- ``download-0.10.0``: in the pair where the writer is held between its ``os.remove`` and its
  ``os.symlink``, the server makes the pointer and comes up; the writer then dies of
  ``FileExistsError`` (caught: the pair names the step and the replay);
- ``download-installed``: the installed huggingface_hub takes a pointer that is already there:
  every pair passes, the server and the writer both.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_startup_guard import ServerFleet, ready

RELEASES = Path(sys.prefix) / "hub-releases"
TIMEOUT = float(os.environ.get("ZOO_TIMEOUT", "20"))
# A server whose start-up downloads its config online (the installed huggingface_hub), as a
# rank does while another downloads the same file.
SERVER = """
import json, time
from huggingface_hub import hf_hub_download
with open(hf_hub_download("acme/tiny", "config.json")) as handle:
    json.load(handle)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(
    "release", ["0.10.0", "installed"], ids=["download-0.10.0", "download-installed"]
)
def test_two_downloads_of_one_file(
    hub_remote: Any, server_fleet: ServerFleet, release: str
) -> None:
    folder = None
    if release != "installed":
        folder = RELEASES / release
        if not (folder / "huggingface_hub").is_dir():
            pytest.skip(f"huggingface_hub {release} is not in {folder}: `make test` installs it")
    hub_remote.add_model("acme/tiny", {"config.json": {"model_type": "gpt2", "n_layer": 2}})
    writer = hub_remote.writer(
        "acme/tiny", call="hf_hub_download", filename="config.json", release=folder
    )
    exploration = server_fleet.explore_writer(
        writer,
        [sys.executable, "-c", SERVER],
        ready=ready.log("ready"),
        points=[1],  # the server held before its first access of the cache
        cache=hub_remote.cache,
        timeout=TIMEOUT,
    )
    print(exploration)
    exploration.assert_no_failures()  # 0.10.0: writer: exited with code 1: FileExistsError
