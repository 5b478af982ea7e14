"""No false alarms: the examples' retry server under every transient race, 200 start-ups.

``config_server.py --policy retry --loader hub_json`` (a bounded, jittered retry that re-raises at
the end) must come up every time under the default deterministic trigger (the window is open
0.5 s, the retry budget is about 1.5 s). A failure here would be a false alarm: the plugin
calling a correct fix broken. Six fleets run at a time: the servers mostly sleep in their retries.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

from harness import emit, figure, parse_args
from workbench import Bench, server_command, workbench

from pytest_startup_guard import ready
from pytest_startup_guard.races.catalog import races_for_all


def start_up(bench: Bench, race: str, run: int) -> tuple[bool, bool]:
    """(came up with the real config, the race hit it)."""
    with bench.test(seed=run) as (cache, races, fleets):
        armed = races.arm(race, cache.repo("acme/tiny"), "config.json", allow_miss=True)
        fleet = fleets.launch(
            server_command("retry", loader="hub_json"),
            count=1,
            ready=ready.http("/config", expect=lambda body: '"n_layer": 3' in body),
        )
        return all(server.ready for server in fleet.servers), bool(armed.hits)


def main() -> None:
    args = parse_args(__doc__ or "")
    total = 8 if args.quick else 200
    races = races_for_all()
    plan = [(races[n % len(races)], n) for n in range(total)]
    with workbench() as bench, ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda item: start_up(bench, *item), plan))
    failures = sum(1 for up, _ in results if not up)
    unhit = sum(1 for _, hit in results if not hit)
    emit(
        [
            figure(
                f"false alarms: retry server failures in {total} raced start-ups",
                failures,
                "runs",
                target="0",
                passed=failures == 0,
                detail=f"races {', '.join(races)} in turn; {total - unhit}/{total} start-ups really hit",
            )
        ],
        args,
    )


if __name__ == "__main__":
    sys.exit(main())
