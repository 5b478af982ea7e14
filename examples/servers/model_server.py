"""A small real API server that loads a whole model from the Hugging Face cache at start-up.

    python model_server.py --model acme/tiny --port 8000 [--policy POLICY]
        [--weights model.safetensors.index.json]

At start-up it loads what a serving stack loads, through the real libraries and without torch:

- the config: ``transformers.AutoConfig.from_pretrained``;
- the fast tokenizer (from ``tokenizer.json``, read in Rust by ``tokenizers``):
  ``transformers.AutoTokenizer.from_pretrained``;
- the weights: ``huggingface_hub.hf_hub_download`` of ``model.safetensors`` (``--weights``), read
  in Rust by ``safetensors.numpy.load_file``; or, with ``--weights
  model.safetensors.index.json``, the index, then each shard it names, as transformers loads
  sharded weights.

With ``$EXPECT`` (JSON: ``model_type``, ``probe_text`` and ``probe_ids``, ``tensors`` with each
one's ``shape`` and ``sum``; examples/tiny_model.py's ``expected()``) it checks what it loaded
against what it should have loaded, and a difference is a load error: transformers goes on
without a ``tokenizer.json`` it did not find, and a tokenizer put together from what was left
gives other ids. The server's own output is the truth about what it met, one line each
(also appended to the file ``$LOAD_LOG`` names, when set):

- ``pid N: load error on FILE: TYPE: MESSAGE``: an error met while loading FILE;
- ``pid N: loaded MODEL``: the whole model, as expected;
- ``pid N: failed to load MODEL: load error on FILE: ...``: it gives up, after its traceback
  (then it exits 1), naming the last load error it met.

It serves ``GET /health`` (200 once the model is loaded) and ``GET /config`` (what it loaded:
the model type, the token ids of a probe text and every tensor's shape, as JSON). What it does
when loading fails:

- ``naive``: nothing: it dies (a transient race kills it);
- ``retry``: the whole load again, a bounded, jittered retry that re-raises at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from config_server import serve, with_retry  # the same server and retry as the config server

PROBE_TEXT = "hello world"
WEIGHTS = "model.safetensors"
MAX_RETRIES = 6
# The load errors this process met, in order: its last one is its reason to give up.
MET: list[str] = []


class WrongModel(ValueError):
    """What was loaded is not what should have been: the library went on with something else."""


def say(line: str) -> None:
    """One line of the server's own account: on stdout, and appended to ``$LOAD_LOG``."""
    print(line, flush=True)
    log = os.environ.get("LOAD_LOG")
    if log:
        with open(log, "a") as handle:  # one short write: lines of processes do not mix
            handle.write(line + "\n")


@contextmanager
def loading(filename: str) -> Iterator[None]:
    """Name the file being loaded in the line of any error met meanwhile, then re-raise."""
    try:
        yield
    except Exception as error:
        message = " ".join(str(error).split())[:300]
        MET.append(f"load error on {filename}: {type(error).__name__}: {message}")
        say(f"pid {os.getpid()}: {MET[-1]}")
        raise


def differs(what: str, got: object, want: object) -> None:
    if got != want:
        raise WrongModel(f"the {what} is {got!r}, expected {want!r}")


def load_weights(model: str, weights: str) -> dict[str, Any]:
    """Every tensor, from one file or from each shard its index names."""
    from huggingface_hub import hf_hub_download
    from safetensors.numpy import load_file

    shards = [weights]
    if weights.endswith(".index.json"):
        with loading(weights), open(hf_hub_download(model, weights)) as handle:
            shards = sorted(set(json.load(handle)["weight_map"].values()))
    tensors: dict[str, Any] = {}
    for shard in shards:
        with loading(shard):
            found = load_file(hf_hub_download(model, shard))
            if not found:
                raise WrongModel(f"{shard} of {model} holds no tensor")
            tensors.update(found)
    return tensors


def load_model(
    model: str, weights: str = WEIGHTS, expect: dict[str, Any] | None = None
) -> dict[str, Any]:
    from transformers import AutoConfig, AutoTokenizer

    want = expect or {}
    probe = want.get("probe_text", PROBE_TEXT)
    with loading("config.json"):
        config = AutoConfig.from_pretrained(model)
        if "model_type" in want:
            differs("model type", config.model_type, want["model_type"])
    with loading("tokenizer.json"):
        tokenizer = AutoTokenizer.from_pretrained(model)
        ids = tokenizer(probe)["input_ids"]
        if "probe_ids" in want:
            differs(
                f"tokenizer's ids of {probe!r} ({type(tokenizer).__name__})", ids, want["probe_ids"]
            )
    tensors = load_weights(model, weights)
    if "tensors" in want:
        with loading(weights):
            got = {
                name: {"shape": list(array.shape), "sum": float(array.sum())}
                for name, array in sorted(tensors.items())
            }
            differs("weights' tensors", got, want["tensors"])
    say(f"pid {os.getpid()}: loaded {model}")
    return {
        "model_type": config.model_type,
        "tokenizer": type(tokenizer).__name__,
        "probe_ids": ids,
        "tensors": {name: list(array.shape) for name, array in sorted(tensors.items())},
    }


def load(
    model: str, policy: str, weights: str = WEIGHTS, expect: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The whole load, once (``naive``) or retried (``retry``)."""
    if policy == "naive":
        return load_model(model, weights, expect)
    if policy == "retry":
        return with_retry(
            lambda: load_model(model, weights, expect), f"loading {model}", max_retries=MAX_RETRIES
        )
    raise ValueError(f"unknown policy {policy!r}")


def give_up(model: str) -> str:
    """Print the traceback being handled, then say why this process gives up (its last line, so
    that the tail of its output holds it); return that line."""
    traceback.print_exc()
    line = f"pid {os.getpid()}: failed to load {model}: {MET[-1] if MET else 'no load error said'}"
    say(line)
    return line


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--policy", choices=("naive", "retry"), default="naive")
    parser.add_argument("--weights", default=WEIGHTS, help="the weights' file, or their index")
    args = parser.parse_args()
    expect = os.environ.get("EXPECT")
    try:
        loaded = load(args.model, args.policy, args.weights, json.loads(expect) if expect else None)
    except Exception:
        print(f"server failed to start: could not load the model {args.model}", file=sys.stderr)
        give_up(args.model)
        return 1
    serve(loaded, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
