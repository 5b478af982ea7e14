"""More ways to start a thread, each reaching an import: what the scan finds, and how hard.

Run ``python -m pytest_startup_guard.imports.scan examples/imports/acme_server`` to see them.
"""

from __future__ import annotations

import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor


def _load_tokenizer() -> object:
    from plain_lib import AutoThing  # reached through a helper: still a background import

    return AutoThing


def prefetch(executor: ThreadPoolExecutor) -> None:
    def job() -> object:
        try:
            return _load_tokenizer()
        except:  # noqa: E722  # bare except: the race's ImportError vanishes
            return None

    executor.submit(job)


class Engine:
    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=2)

    def _load(self, name: str) -> object:
        try:
            import lazy_swap_lib
        except Exception:  # swallowed: a fallback hides the race
            return None
        return getattr(lazy_swap_lib, name)

    def start(self) -> None:
        threading.Thread(target=self._load, args=("AutoThing",)).start()
        list(self._pool.map(self._load, ["AutoThing"]))


class Watcher(threading.Thread):
    def run(self) -> None:
        import lazy_swap_lib  # unguarded: a warning (the failure is at least printed)

        lazy_swap_lib.AutoThing.name  # noqa: B018


def in_other_processes() -> None:
    with ProcessPoolExecutor() as pool:
        pool.submit(_load_tokenizer)  # another process: no thread race, not reported


def in_the_main_thread() -> None:
    import lazy_swap_lib  # not reached from a thread: not reported

    lazy_swap_lib.AutoThing.name  # noqa: B018
