"""GOOD: import in the main thread, then let the background thread use what is imported.

An import is never raced: the main thread's import finishes before the thread starts, and the
thread's work cannot fail unseen (no ``suppress(Exception)`` around it).
"""

from __future__ import annotations

import threading

import lazy_swap_lib


def _warm_up() -> None:
    lazy_swap_lib.AutoThing.name  # noqa: B018


def main() -> None:
    from lazy_swap_lib import AutoThing

    threading.Thread(target=_warm_up, daemon=True).start()
    print("ready", AutoThing.name)


if __name__ == "__main__":
    main()
