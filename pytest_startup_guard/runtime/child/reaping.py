"""The waits of a parent under the plan: each child it reaps is told to the controller.

``os.waitpid``, ``os.wait``, ``os.wait3``, ``os.wait4`` and ``os.waitid`` are wrapped
(``exits.watch_exit``) to report each child they reap: a supervisor's wait is the truth about a
worker, also one killed by a signal. What they return or raise is unchanged.

Built-in modules only (``os``, ``time``): children import this at interpreter start.
"""

from __future__ import annotations

import os
import time

from pytest_startup_guard.runtime.child.state import state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def wrap_waits(wrap: Callable[[Any, str, Any], None]) -> None:
    """Have ``wrap(os, name, wrapper)`` put a reporting wrapper on each wait this system has."""
    for name in ("waitpid", "wait", "wait3", "wait4"):
        wait = getattr(os, name, None)
        if wait is not None:
            wrap(os, name, _reporting(wait))
    waitid = getattr(os, "waitid", None)
    if waitid is not None:
        wrap(os, "waitid", _reporting_waitid(waitid))


def _reporting(wait: Callable[..., Any]) -> Callable[..., Any]:
    """``os.waitpid`` and its kin (their results start with ``(pid, status)``), reporting."""

    def reporting_wait(*args: Any, **kwargs: Any) -> Any:
        result = wait(*args, **kwargs)
        try:
            _report_reaped(result[0], os.waitstatus_to_exitcode(result[1]))
        except Exception:  # nothing was reaped (pid 0), a stopped child, or no controller
            pass
        return result

    reporting_wait.__name__ = reporting_wait.__qualname__ = wait.__name__
    reporting_wait.__doc__ = wait.__doc__
    return reporting_wait


def _reporting_waitid(waitid: Callable[..., Any]) -> Callable[..., Any]:
    """``os.waitid``, reporting: only an exit or a kill, and not with ``WNOWAIT`` (no reap)."""

    def reporting_waitid(*args: Any, **kwargs: Any) -> Any:
        result = waitid(*args, **kwargs)
        try:
            options = args[2] if len(args) > 2 else kwargs.get("options", 0)
            if result is not None and not options & os.WNOWAIT:
                if result.si_code == os.CLD_EXITED:
                    _report_reaped(result.si_pid, result.si_status)
                elif result.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
                    _report_reaped(result.si_pid, -result.si_status)
        except Exception:
            pass
        return result

    reporting_waitid.__name__ = reporting_waitid.__qualname__ = waitid.__name__
    reporting_waitid.__doc__ = waitid.__doc__
    return reporting_waitid


def _report_reaped(pid: int, code: int) -> None:
    """This process reaped child ``pid``: it exited with ``code`` (negative: that signal)."""
    client = state.client
    if pid > 0 and client is not None:
        message = {"op": "reaped", "pid": pid, "code": code, "t": time.monotonic()}
        client.notify({**message, "by": os.getpid()})
