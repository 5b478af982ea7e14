"""BAD: the start-up "speed-up" of incident 2: import the heavy library in a background thread.

The main thread goes on to ``from lazy_swap_lib import AutoThing`` while the warm-up thread is
still importing: the main thread gets the stale module and fails with ``ImportError: cannot
import name 'AutoThing'``; when the main thread wins, the warm-up's ``AttributeError`` is
swallowed by ``suppress(Exception)`` and nobody ever sees it.
"""

from __future__ import annotations

import contextlib
import threading


def _warm_up() -> None:
    with contextlib.suppress(Exception):
        import lazy_swap_lib

        lazy_swap_lib.AutoThing.name  # noqa: B018


def main() -> None:
    threading.Thread(target=_warm_up, daemon=True).start()
    from lazy_swap_lib import AutoThing

    print("ready", AutoThing.name)


if __name__ == "__main__":
    main()
