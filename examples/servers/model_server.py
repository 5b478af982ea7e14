"""A small real API server that loads a whole model from the Hugging Face cache at start-up.

    python model_server.py --model acme/tiny --port 8000 [--policy POLICY]

At start-up it loads what a serving stack loads, through the real libraries and without torch:

- the config: ``transformers.AutoConfig.from_pretrained``;
- the fast tokenizer (from ``tokenizer.json``): ``transformers.AutoTokenizer.from_pretrained``;
- the weights: ``huggingface_hub.hf_hub_download`` of ``model.safetensors``, read with
  ``safetensors.numpy.load_file``.

It serves ``GET /health`` (200 once the model is loaded) and ``GET /config`` (what it loaded:
the model type, the token ids of a probe text and every tensor's shape, as JSON). What it does
when loading fails:

- ``naive``: nothing: it dies (a transient race kills it);
- ``retry``: the whole load again, a bounded, jittered retry that re-raises at the end.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import Any

from config_server import serve, with_retry  # the same server and retry as the config server

PROBE_TEXT = "hello world"


def load_model(model: str) -> dict[str, Any]:
    from huggingface_hub import hf_hub_download
    from safetensors.numpy import load_file
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    weights = load_file(hf_hub_download(model, "model.safetensors"))
    if not weights:
        raise ValueError(f"the weights of {model} hold no tensor")
    return {
        "model_type": config.model_type,
        "tokenizer": type(tokenizer).__name__,
        "probe_ids": tokenizer(PROBE_TEXT)["input_ids"],
        "tensors": {name: list(array.shape) for name, array in sorted(weights.items())},
    }


def load(model: str, policy: str) -> dict[str, Any]:
    if policy == "naive":
        return load_model(model)
    if policy == "retry":
        return with_retry(lambda: load_model(model), f"loading {model}", max_retries=6)
    raise ValueError(f"unknown policy {policy!r}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--policy", choices=("naive", "retry"), default="naive")
    args = parser.parse_args()
    try:
        loaded = load(args.model, args.policy)
    except Exception:
        traceback.print_exc()
        print(f"server failed to start: could not load the model {args.model}", file=sys.stderr)
        return 1
    serve(loaded, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
