"""A forked child is a new process under test: it joins its parent's plan again, or stands down.

After a fork (``os.register_at_fork``), the child says hello again under its parent's plan, with
a new identity, connection and dump file, and an exit of its own (``after_fork``). If that
plan's controller is gone by then, it quietly undoes what it inherited (``_stand_down``) and
runs as without a plan.

Built-in modules only (``_thread``, ``faulthandler``, ``os``, ``sys``): children import this at
interpreter start.
"""

from __future__ import annotations

import _thread
import faulthandler
import os
import sys

from pytest_startup_guard.runtime.child.audit import set_footprint, set_watched
from pytest_startup_guard.runtime.child.exits import unwatch_exit, watch_exit
from pytest_startup_guard.runtime.child.join import join, load_plan
from pytest_startup_guard.runtime.child.state import DUMP_SIGNAL, state
from pytest_startup_guard.runtime.child.workers import (
    unwatch_multiprocessing,
    watch_multiprocessing,
)
from pytest_startup_guard.runtime.observation import set_unobserved
from pytest_startup_guard.runtime.protocol import MEMBER_ENV, PLAN_ENV


def after_fork() -> None:
    """A forked child is a new process under test: new identity, connection and dump file,
    and an exit of its own (no status, cause or bye yet). If its parent's controller is gone by
    now, it runs as without a plan, quietly: one line per fork would flood a pre-forking
    server's output."""
    set_unobserved(False)
    inherited = state.client
    state.client = None
    if inherited is not None:
        inherited.sock = None  # the parent's connection: leave it to the parent
    set_watched(())
    state.sink, state.binds = None, False
    set_footprint(False)
    state.main_tid, state.said_bye = _thread.get_ident(), False
    state.exit_status, state.cause, state.failing = None, None, False
    plan, member, of_the_test = state.plan, state.member, False
    if plan is None:
        if state.owner_pid == 0:
            return  # nothing was active in the parent
        # A fork of the test process reports through the socket, like any other child.
        state.owner_pid, of_the_test = 0, True
        plan = load_plan(os.environ.get(PLAN_ENV))
        if plan is None:
            return
        member = os.environ.get(MEMBER_ENV)
    if join(plan, member, (*state.ancestry, os.getppid()), forked=True) is not None:
        _stand_down()
        return
    if of_the_test:
        watch_exit()
    if "multiprocessing.process" in sys.modules:  # a fork worker's bootstrap comes next
        watch_multiprocessing()


def _stand_down() -> None:
    """Undo what this forked child inherited of a plan whose controller is gone: the stack
    dump's signal handler, the wrapped exit and waits, multiprocessing's wrapped bootstrap.
    (The audit hook cannot be removed: it stays, with nothing to report to, at the cost of a
    set lookup per event.)"""
    state.plan, state.member, state.ancestry = None, None, ()
    unwatch_multiprocessing()
    if state.dump_file is not None:
        faulthandler.unregister(DUMP_SIGNAL)
        try:
            state.dump_file.close()  # this process's copy of the parent's descriptor
        except OSError:
            pass
        state.dump_file, state.dump_path = None, None
    unwatch_exit()
