"""How a process under the plan ends, told to the controller (``watch_exit`` says how).

Its exit status where it knows it (the wrapped ``sys.exit``), its cause (its first uncaught
exception: ``note_uncaught``) and its bye, after every exit handler of the program or in
``os._exit`` (``say_bye``); a failing exit freezes the collector at the very end. The children
it reaps are told by its wrapped waits (``reaping``).

Built-in modules only (``_thread``, ``atexit``, ``gc``, ``os``, ``sys``, ``time``): children
import this at interpreter start.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal minus its enum import
import _thread
import atexit
import gc
import os
import sys
import time

from pytest_startup_guard.runtime.child.reaping import wrap_waits
from pytest_startup_guard.runtime.child.state import state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

MAX_CAUSE = 500  # characters of a cause ("TypeName: message") sent in a bye
_BYE_WAIT = 0.2  # seconds: the longest an exit waits for another thread's message to go first


def note_uncaught(exc_type: Any, value: Any, main: bool) -> None:
    """An uncaught exception: the first is the cause; in the main thread it ends the process
    (with status 1, or by SIGINT for a KeyboardInterrupt, as the interpreter does)."""
    if main:
        interrupted = isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt)
        state.exit_status = -_signal.SIGINT if interrupted else 1
    if state.cause is None:
        state.cause = describe_exception(exc_type, value)


def describe_exception(exc_type: Any, value: Any) -> str:
    """``TypeName: message`` on one line, at most ``MAX_CAUSE`` characters."""
    name = getattr(exc_type, "__name__", None) or type(value).__name__
    try:
        message = str(value)
    except Exception:  # a broken __str__ must not break the exit
        message = ""
    line = " ".join(f"{name}: {message}".split()) if message else str(name)
    return line if len(line) <= MAX_CAUSE else line[: MAX_CAUSE - 3] + "..."


def watch_exit() -> None:
    """Learn how this process ends and tell the controller; see its children's ends.

    - ``sys.exit`` is wrapped rather than hooked (no audit event tells its status, and console
      scripts end with ``sys.exit(main())``): the status of the main thread's last call is the
      exit status (a ``raise SystemExit(3)`` of its own is not seen: the status stays unknown);
      a failing one also freezes the collector at the very end (``_freeze_failing_exit``);
    - the exit handler is registered before any user code, so it runs after every exit handler
      of the program: it says bye (``say_bye``); ``os._exit``, which skips the exit handlers
      (multiprocessing's fork workers end with it), says bye with its status first;
    - ``_thread._excepthook``, what ``threading.excepthook`` is once threading is imported,
      notes the cause of a thread's uncaught exception (no audit event tells it);
    - ``os.waitpid``, ``os.wait``, ``os.wait3``, ``os.wait4`` and ``os.waitid`` report each child
      they reap (``reaping``); what they return or raise is unchanged.
    """
    if state.exit_watched:
        return
    state.exit_watched = True
    state.wrapped = ()
    state.main_tid = _thread.get_ident()
    original_exit = sys.exit

    def exit(status: Any = None) -> NoReturn:
        if _thread.get_ident() == state.main_tid:
            state.exit_status = exit_status_of(status)
        if status is not None and status != 0:
            state.failing = True
        original_exit(status)

    exit.__doc__ = original_exit.__doc__
    _wrap(sys, "exit", exit)

    original_os_exit = os._exit

    def _exit(status: int) -> NoReturn:
        if type(status) is int:
            say_bye(status & 0xFF)
        original_os_exit(status)

    _exit.__doc__ = original_os_exit.__doc__
    _wrap(os, "_exit", _exit)
    wrap_waits(_wrap)
    thread_hook = getattr(_thread, "_excepthook", None)
    if thread_hook is not None:
        _wrap(_thread, "_excepthook", _noting_thread_failures(thread_hook))
    atexit.register(_at_exit)


def _wrap(owner: Any, name: str, wrapper: Any) -> None:
    state.wrapped += ((owner, name, getattr(owner, name), wrapper),)
    setattr(owner, name, wrapper)


def unwatch_exit() -> None:
    """Put back what ``watch_exit`` wrapped, where the program has not replaced it since
    (``threading.excepthook`` too: a copy of ``_thread._excepthook`` once threading loaded)."""
    if not state.exit_watched:
        return
    state.exit_watched = False
    threading = sys.modules.get("threading")
    for owner, name, original, wrapper in reversed(state.wrapped):
        if getattr(owner, name, None) is wrapper:
            setattr(owner, name, original)
        if name == "_excepthook" and getattr(threading, "excepthook", None) is wrapper:
            threading.excepthook = original  # type: ignore[union-attr]
    state.wrapped = ()
    atexit.unregister(_at_exit)


def exit_status_of(status: Any) -> int:
    """The status a process exits with after ``sys.exit(status)``."""
    if status is None:
        return 0
    if isinstance(status, int):
        return status & 0xFF
    return 1  # an object: printed, and the process fails


def _at_exit() -> None:
    say_bye(state.exit_status)
    _freeze_failing_exit()


def say_bye(code: int | None) -> None:
    """Tell the controller this process is ending, once: ``code`` and its first uncaught
    exception. Never raises, and waits at most ``_BYE_WAIT`` for another thread's message."""
    client = state.client
    if state.said_bye or client is None:
        return
    state.said_bye = True
    try:
        message = {"op": "bye", "pid": os.getpid(), "t": time.monotonic()}
        client.notify({**message, "code": code, "cause": state.cause}, wait=_BYE_WAIT)
    except Exception:  # nothing here may ever break an exit
        pass


def _noting_thread_failures(hook: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def _excepthook(args: Any, /) -> Any:
        try:
            if not issubclass(args.exc_type, SystemExit):  # the hook ignores those too
                note_uncaught(args.exc_type, args.exc_value, main=False)
        except Exception:
            pass
        return hook(args)

    _excepthook.__doc__ = hook.__doc__
    return _excepthook


def _freeze_failing_exit() -> None:
    """In a process exiting with a failure, leave every object to reference counting.

    Finalization runs the cycle collector over every module's objects several times: about
    200 ms after ``import transformers`` on this project's CI machine, 20 ms frozen, and a
    caught race ends when its first server has exited. The exit code is decided by then. What
    changes: objects that only module globals keep alive are finalized when their module is
    cleared, later, where their ``__del__`` may find other globals already set to None (as
    Python's documentation warns it may at any exit). A process that exits cleanly is left as it
    is.
    """
    if state.failing:
        gc.freeze()
