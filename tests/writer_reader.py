"""A reader of the hub cache for ``explore_writer``'s tests: a server's start-up, offline first.

    python writer_reader.py MODE REPO_ID FILENAME [PINNED_COMMIT]

- ``pinned``: what a server that resolves ``main`` once and loads that commit does (reading the
  hub layout itself: cheap, no import of huggingface_hub). It reads ``refs/main``; a ref that
  names no commit (empty, truncated) is fatal. Then it opens that commit's FILENAME; where that
  commit's files are not all there yet (a refresh under way: huggingface_hub writes the ref
  before it downloads the files) it keeps serving PINNED_COMMIT, the one it was deployed with.
- ``download``: ``huggingface_hub.hf_hub_download(REPO_ID, FILENAME)`` online (the remote the
  environment names), then opens the file: a rank that downloads the same file as the writer.

Then it prints ``ready`` and sleeps until it is stopped.
"""

import json
import os
import re
import sys
import time

mode, repo, filename = sys.argv[1], sys.argv[2], sys.argv[3]
pinned = sys.argv[4] if len(sys.argv) > 4 else None
folder = os.path.join(os.environ["HF_HUB_CACHE"], "models--" + repo.replace("/", "--"))

if mode == "pinned":
    with open(os.path.join(folder, "refs", "main")) as ref:
        commit = ref.read()
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise SystemExit(f"ValueError: refs/main of {repo} holds {commit!r}, not a commit")
    path = os.path.join(folder, "snapshots", commit, filename)
    if not os.path.exists(path) and pinned is not None:
        path = os.path.join(folder, "snapshots", pinned, filename)
else:
    from huggingface_hub import hf_hub_download

    path = hf_hub_download(repo, filename)
with open(path) as handle:
    json.load(handle)
print("ready", flush=True)
time.sleep(120)
