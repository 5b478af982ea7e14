"""Trust: what a user hands the plugin (mistakes, their machine, their terminal) and what it leaves.

Four parts, each in a module of its own that can also run alone:

- misuse (``trust_misuse``): every case of ``tests/misuse_cases.py`` run as a user would, and
  the share that gets the plugin's clear error naming the argument and the bad value (target
  100 %); the same share over the generated misuses of ``tests/misuse_generated*.py``, with
  internal exceptions, silent acceptances, late failures and hangs counted apart;
- ``kill -9`` (``trust_kill``): rounds of a pytest run whose members detached helpers (a
  double-forked Python daemon, a shell's ``setsid sleep``, a start-method check hanging), then
  SIGKILL of pytest: processes of the run and plan folders left, and the slowest clean-up
  (targets 0, 0 and under 15 s);
- output (``trust_output``): pytest's CPU time and extra peak memory while ``ready.log`` follows
  two members printing 100 MB each (targets under 1 s and under 50 MB);
- the ``.pth`` line (``trust_runtime``): what the boot line costs ``python -c pass`` when no
  plan is set, interleaved runs with the line present and moved away (target under 1 %).

``--quick`` runs each part small: one ``kill -9`` round, 10 MB of output, 60 start-up pairs.
"""

from __future__ import annotations

import sys

import trust_kill
import trust_misuse
import trust_output
import trust_runtime
from harness import Figure, emit, figure, parse_args

KILL_ROUNDS = 5
CLEAN_UP_SECONDS = 15.0


def kill_figures(rounds: int) -> list[Figure]:
    measured = trust_kill.summary(trust_kill.kill_9_rounds(rounds))
    helpers = f"{measured['helpers_per_round']} helpers a round, {rounds} rounds"
    slowest = measured["slowest_seconds"]
    return [
        figure(
            "trust: processes left after kill -9 of pytest",
            float(measured["processes_left"]),  # type: ignore[arg-type]
            "processes",
            target="0",
            passed=measured["processes_left"] == 0,
            detail=helpers,
        ),
        figure(
            "trust: plan folders left after kill -9 of pytest",
            float(measured["folders_left"]),  # type: ignore[arg-type]
            "folders",
            target="0",
            passed=measured["folders_left"] == 0,
            detail=helpers,
        ),
        figure(
            "trust: slowest clean-up after kill -9 of pytest",
            -1.0 if slowest is None else float(slowest),  # type: ignore[arg-type]
            "s",
            target=f"< {CLEAN_UP_SECONDS:.0f} s",
            passed=slowest is not None and float(slowest) < CLEAN_UP_SECONDS,  # type: ignore[arg-type]
            detail=f"{helpers}; -1 when some round was not clean within the limit",
        ),
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    figures = [
        *trust_misuse.figures(args.quick),
        *kill_figures(1 if args.quick else KILL_ROUNDS),
        *trust_output.figures(args.quick),
        *trust_runtime.figures(60 if args.quick else 300),
    ]
    emit(figures, args)


if __name__ == "__main__":
    sys.exit(main())
