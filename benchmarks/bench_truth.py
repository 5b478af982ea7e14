"""Truth: the plugin's verdicts on a real model stack against the servers' own account.

Two parts, each in a module of its own that can also run alone:

- verdicts (``truth_stack``): the example model stack (``examples/model_stack.py``: config,
  tokenizer and weights through transformers, tokenizers, huggingface_hub and safetensors),
  naive and retrying, as two processes and under ``uvicorn --workers 2``, under every race
  (``pointer_swap``, ``ref_rewrite``, ``blob_rewrite``, ``dangling_pointer``) and three
  corruptions on every file of the repo (``config.json``, ``tokenizer.json``,
  ``model.safetensors``, the second shard of two): 112 cases run as users run them, each
  verdict counted against what the servers said they met and did. False greens, false reds
  and vacuous greens (targets 0, 0, 0), with each disagreeing case printed with both accounts;
- the default trigger's cost (``truth_trigger``): the same passing retry fleet under
  ``on_access()`` and ``on_access(nth=1)``, interleaved (target: within 5 %).

``--quick`` runs 4 cases (``pointer_swap`` and ``truncated`` on the weights, naive and
retrying, two processes) and 2 pairs of start-ups.
"""

from __future__ import annotations

import json
import sys

import truth_stack
import truth_trigger
from harness import Figure, emit, figure, parse_args

MIN_CASES = 100
TRIGGER_COST = 1.05


def verdict_figures(quick: bool) -> list[Figure]:
    measured = truth_stack.measure(quick)
    for finding in measured["findings"]:
        print("finding:", json.dumps(finding), flush=True)
    counts = measured["judgements"]
    cases = measured["cases"]
    detail = f"{cases} cases; servers' truth: {measured['truths']}"
    figures = [
        figure(
            "truth: cases judged against the servers' own account",
            float(cases),
            "cases",
            target=None if quick else f">= {MIN_CASES}",
            passed=None if quick else cases >= MIN_CASES,
            detail=f"of {measured['expected_cases']} run; {measured['plugin_passed']} passed",
        )
    ]
    for judgement in ("false green", "false red", "vacuous green"):
        figures.append(
            figure(
                f"truth: {judgement}s",
                float(counts.get(judgement, 0)),
                "cases",
                target="0",
                passed=counts.get(judgement, 0) == 0 and cases == measured["expected_cases"],
                detail=detail,
            )
        )
    return figures


def trigger_figures(pairs: int) -> list[Figure]:
    measured = truth_trigger.measure_trigger(pairs)
    return [
        figure(
            "truth: default trigger / on_access(nth=1), retry fleet wall time",
            measured["ratio"],
            "x",
            target=f"<= {TRIGGER_COST}",
            passed=measured["ratio"] <= TRIGGER_COST,
            detail=(
                f"median of {pairs} interleaved pairs, {measured['ratio_min']:.3f} to"
                f" {measured['ratio_max']:.3f}; {measured['default_s']:.2f} s /"
                f" {measured['nth1_s']:.2f} s; processes hit (fewest): {measured['processes_hit']}"
            ),
        )
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    figures = [*verdict_figures(args.quick), *trigger_figures(2 if args.quick else 7)]
    for item in figures:
        print(f"  {item['figure']}: {item['detail']}")
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
