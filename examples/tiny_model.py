"""A tiny model, built here (no download), as ``save_pretrained`` writes one: the examples, the
benchmarks and the tests share it.

    build_tiny_model(folder)                # config.json, tokenizer.json (+ its config), model.safetensors
    build_tiny_model(folder, sharded=True)  # the weights in two shards, with their index
    add_tiny_model(hub_cache, "acme/stack", scratch)  # built in scratch, added to the fake cache

- the config: a ``transformers.GPT2Config`` (one layer, 8 dimensions);
- the tokenizer: a ``tokenizers`` WordLevel model over four words, saved through
  ``PreTrainedTokenizerFast`` (``tokenizer.json``, read in Rust by ``tokenizers``);
- the weights: two float32 tensors written with ``safetensors.numpy`` (read in Rust), in one
  ``model.safetensors`` or, sharded, one tensor in each of ``model-00001-of-00002.safetensors``
  and ``model-00002-of-00002.safetensors`` with ``model.safetensors.index.json``, the layout
  transformers writes for sharded weights.

``expected(sharded)`` is what a server that loaded it whole must have: the probe text's token
ids, each tensor's shape and sum, the file that names the weights. A server is given it from
outside the cache (a race or a corruption of the cache cannot change it), so it can tell a model
loaded whole from one a library put together from what it found.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROBE_TEXT = "hello world tiny"
PROBE_IDS = [1, 2, 3]
VOCAB = {"[UNK]": 0, "hello": 1, "world": 2, "tiny": 3}
SINGLE_WEIGHTS = "model.safetensors"
SHARD_INDEX = "model.safetensors.index.json"
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")


def _tensors() -> dict[str, Any]:
    import numpy as np

    return {
        "wte": np.arange(32, dtype=np.float32).reshape(4, 8),
        "wpe": np.arange(128, dtype=np.float32).reshape(16, 8) / 8,
    }


def expected(sharded: bool = False) -> dict[str, Any]:
    """What loading the tiny model whole gives: the server's yardstick (plain JSON)."""
    return {
        "model_type": "gpt2",
        "probe_text": PROBE_TEXT,
        "probe_ids": PROBE_IDS,
        "weights": SHARD_INDEX if sharded else SINGLE_WEIGHTS,
        "tensors": {
            name: {"shape": list(array.shape), "sum": float(array.sum())}
            for name, array in sorted(_tensors().items())
        },
    }


def build_tiny_model(folder: Path, *, sharded: bool = False) -> Path:
    """Write the tiny model into ``folder`` (created); return it."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    backend = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(folder)
    GPT2Config(
        n_layer=1, n_head=2, n_embd=8, n_positions=16, vocab_size=4, bos_token_id=0, eos_token_id=0
    ).save_pretrained(folder)
    tensors = _tensors()
    if not sharded:
        save_file(tensors, str(folder / SINGLE_WEIGHTS))
        return folder
    weight_map = {}
    for shard, name in zip(SHARDS, sorted(tensors), strict=True):
        save_file({name: tensors[name]}, str(folder / shard))
        weight_map[name] = shard
    total = sum(int(array.nbytes) for array in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / SHARD_INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return folder


def add_tiny_model(hub_cache: Any, repo_id: str, scratch: Path, *, sharded: bool = False) -> Any:
    """Build the tiny model in ``scratch`` (a folder of the caller's) and add it to
    ``hub_cache`` (a ``FakeHubCache``) as ``repo_id``; return the ``CachedRepo``."""
    folder = build_tiny_model(scratch / ("tiny-sharded" if sharded else "tiny"), sharded=sharded)
    return hub_cache.add_from_folder(repo_id, folder)
