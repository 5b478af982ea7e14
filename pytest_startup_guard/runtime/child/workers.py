"""multiprocessing under the plan: its helpers left alone, its workers' failures told.

A worker's target that raises is caught by ``BaseProcess._bootstrap``, which prints it and
returns 1: no hook sees it, so the bootstrap is wrapped to note it as the worker's cause
(``watch_multiprocessing``), where ``multiprocessing.process`` is already loaded (a fork; in a
spawned worker, once it loaded it: ``is_spawned_worker``), never importing it. Its resource
tracker is plumbing, not a process under test (``is_multiprocessing_helper``).

Built-in modules only (``sys``): children import this at interpreter start.
"""

from __future__ import annotations

import sys

from pytest_startup_guard.runtime.child.exits import describe_exception
from pytest_startup_guard.runtime.child.state import state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The command line of a multiprocessing spawn worker (CPython 3.8-3.14, spawn.get_command_line).
_SPAWN_MAIN = "from multiprocessing.spawn import spawn_main"


def is_multiprocessing_helper() -> bool:
    """multiprocessing's resource tracker is plumbing, never a process under test."""
    argv = getattr(sys, "orig_argv", sys.argv)
    return any("resource_tracker import main" in arg or "semaphore_tracker" in arg for arg in argv)


def is_spawned_worker() -> bool:
    return any(_SPAWN_MAIN in arg for arg in getattr(sys, "orig_argv", sys.argv))


def watch_multiprocessing() -> None:
    """Note the exception that ends a multiprocessing worker as its cause.

    ``BaseProcess._bootstrap`` catches what the target raises, prints it and returns 1: no
    hook sees it. Its ``run`` is wrapped, on the worker's own process object, to note the
    exception on its way there. Called where ``multiprocessing.process`` is already loaded (a
    fork; in a spawned worker, once it loaded it), never importing it.
    """
    module = sys.modules.get("multiprocessing.process")
    base = getattr(module, "BaseProcess", None)
    if base is None:
        return  # not loaded yet, or still loading
    state.spawned_worker = False
    bootstrap = base.__dict__.get("_bootstrap")
    if bootstrap is None or getattr(bootstrap, "startup_guard", False):
        return

    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            run = self.run

            def run_noting_its_failure() -> Any:
                try:
                    return run()
                except Exception as error:  # what _bootstrap catches: the worker fails
                    if state.cause is None:
                        state.cause = describe_exception(type(error), error)
                    raise

            self.run = run_noting_its_failure
        except Exception:
            pass
        return bootstrap(self, *args, **kwargs)

    _bootstrap.startup_guard = True  # type: ignore[attr-defined]
    _bootstrap.__wrapped__ = bootstrap  # type: ignore[attr-defined]  # for unwatch_multiprocessing
    _bootstrap.__doc__ = bootstrap.__doc__
    base._bootstrap = _bootstrap


def unwatch_multiprocessing() -> None:
    """Put back the bootstrap ``watch_multiprocessing`` wrapped (``fork._stand_down``)."""
    state.spawned_worker = False
    base = getattr(sys.modules.get("multiprocessing.process"), "BaseProcess", None)
    bootstrap = getattr(base, "_bootstrap", None)
    if getattr(bootstrap, "startup_guard", False):
        base._bootstrap = bootstrap.__wrapped__  # type: ignore[union-attr]
