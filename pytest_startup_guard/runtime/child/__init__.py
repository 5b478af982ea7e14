"""The child runtime: the part of the plugin that runs inside every Python process of a test.

A process started with ``STARTUP_GUARD_PLAN`` in its environment imports this package from the
``startup_guard_boot.pth`` line before any user code (``boot``). It first checks that the plan
is live: its folder is a private folder of this user (not a symlink) and its controller answers
the hello. A stale plan (its test is over, or the folder is not ours) changes nothing: the
process runs exactly as without one, after one line on stderr (``plan_refusal``). Under a live
plan it:

- says hello to the controller in the test process and, if it is a fleet member, waits there
  until the whole fleet is released at once (the start barrier), and registers a stack dump of
  all its threads on ``DUMP_SIGNAL`` into its own file (``join``);
- installs an audit hook that reports every open, listdir and scandir under the watched
  folders and waits for the controller's answer before the access proceeds, so that the test
  side can change the cache exactly then (a synchronous trigger); when the controller asks for
  them, also every ``socket.bind`` of an internet address, waiting while the controller answers
  "wait" (how ``same_port`` lets one member bind before the other) (``audit``);
- when the controller asks for them (``port_stolen``), also reports each close of a TCP socket
  it bound to an internet address, a probe for a free port, before the close returns
  (``ports``), and makes the locks it names lock nothing (``locks``);
- says bye when it exits (after every exit handler of the program, or in ``os._exit``, which
  forked workers end with): the exit status when it knows it and the cause, its first
  uncaught exception; a failing exit freezes the garbage collector after every exit handler of
  the program has run, so that finalization does not trace every object again: a server that
  imported transformers spent about 200 ms of its exit there, longer than it took to fail
  (``exits``);
- tells the controller the exit code of every child it reaps (``os.waitpid`` and its kin are
  wrapped): a supervisor's wait is the truth about a worker, also one killed by a signal
  (``reaping``);
- notes the exception that ends a multiprocessing worker as its cause (``workers``);
- when the controller asks for it (``record_footprint``), reports every file it changes and
  every address it reaches (``FOOTPRINT_EVENTS``: ``footprint_of``) without waiting for a reply
  (``footprint``);
- in the real writer's process only, pauses right after each open for writing (``steps``).

A forked child says hello again under its parent's plan; if that plan's controller is gone by
then, the child quietly undoes what it inherited and runs as without a plan (``fork``).

The test process uses the same hook for its own accesses (``activate_in_process``), with the
controller called directly instead of through the socket. The connection to the controller is
``client``; what the runtime knows of this process, ``state``.

Built-in modules only, in every module of this package (``_socket``, ``_thread``, ``_signal``,
``marshal``, ``select``, ``faulthandler``, ``atexit``, ``gc``): it runs in every process under
test before user code, and json, socket, threading or typing would add tens of milliseconds to
each start-up. Every module it needs is imported up front: an import inside an audit hook nests
dozens of events. What it wraps of other modules it wraps where they are already loaded
(multiprocessing's worker bootstrap: in a fork, or once a spawned worker has imported it), never
by importing them.
"""

from __future__ import annotations

import os
import sys

from pytest_startup_guard.runtime.child import looks, steps
from pytest_startup_guard.runtime.child.audit import BIND_EVENT, EXCEPTHOOK_EVENT, hook, set_watched
from pytest_startup_guard.runtime.child.exits import (
    MAX_CAUSE,
    describe_exception,
    exit_status_of,
    watch_exit,
)
from pytest_startup_guard.runtime.child.footprint import footprint_of
from pytest_startup_guard.runtime.child.fork import after_fork
from pytest_startup_guard.runtime.child.join import join, load_plan, plan_refusal
from pytest_startup_guard.runtime.child.state import DUMP_SIGNAL, state
from pytest_startup_guard.runtime.child.workers import is_multiprocessing_helper, is_spawned_worker
from pytest_startup_guard.runtime.protocol import (
    ACCESS_SITES_ENV,
    ANCESTRY_ENV,
    MEMBER_ENV,
    PLAN_ENV,
    WRITER_STEPS_ENV,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pytest_startup_guard.runtime.child.state import AccessSink


def boot() -> None:
    """Entry point of a child process with a plan (called from the .pth line via ``boot.py``).

    A plan that is not live (``plan_refusal``, or a controller that does not answer) is
    ignored with one line on stderr: nothing is installed, wrapped or registered."""
    if state.plan is not None:
        return
    if is_multiprocessing_helper():
        return
    plan = load_plan(os.environ.get(PLAN_ENV))
    if plan is None:
        return
    inherited = os.environ.get(ANCESTRY_ENV, "")
    ancestry = tuple(int(pid) for pid in inherited.split(",") if pid.isdigit())
    why_not = join(plan, os.environ.get(MEMBER_ENV), ancestry, forked=False)
    if why_not is not None:
        sys.stderr.write(
            f"startup-guard: ignoring {PLAN_ENV}, running without the child runtime: {why_not}\n"
        )
        return
    state.spawned_worker = is_spawned_worker()
    state.sites = os.environ.get(ACCESS_SITES_ENV) == "1"
    _install_hook()
    looks.install()
    watch_exit()
    if os.environ.get(WRITER_STEPS_ENV) == "1":  # the real writer: a pause after each open
        steps.install()


def _install_hook() -> None:
    if not state.hook_installed:
        sys.addaudithook(hook)  # cannot be removed: it stays, and costs a set lookup when idle
        state.hook_installed = True
    if not state.fork_handler_installed:
        os.register_at_fork(after_in_child=after_fork)
        state.fork_handler_installed = True


# -- the test process ------------------------------------------------------------------------


def activate_in_process(prefixes: tuple[str, ...], sink: AccessSink) -> None:
    """Watch the test process's own accesses: ``sink(event, path)`` runs before each one."""
    state.owner_pid = os.getpid()
    state.sink = sink
    set_watched(prefixes)
    _install_hook()
    looks.install()  # until it stops watching itself: pytest's own looks cost nothing after


def deactivate_in_process() -> None:
    if state.owner_pid == os.getpid() and state.plan is None:
        set_watched(())
        state.sink, state.owner_pid = None, 0
        looks.uninstall()


def identity() -> dict[str, Any]:
    """What this process knows about itself under the plan (empty when there is none)."""
    return {
        "pid": os.getpid(),
        "active": state.plan is not None and state.client is not None,
        "member": state.member,
        "ancestry": list(state.ancestry),
        "watching": list(state.prefixes),
        "installed": [
            name
            for name, done in (
                ("audit hook", state.hook_installed),
                ("exit watch", state.exit_watched),
                ("stack dump", state.dump_file is not None),
            )
            if done
        ],
    }


__all__ = [
    "BIND_EVENT",
    "DUMP_SIGNAL",
    "EXCEPTHOOK_EVENT",
    "MAX_CAUSE",
    "activate_in_process",
    "boot",
    "deactivate_in_process",
    "describe_exception",
    "exit_status_of",
    "footprint_of",
    "identity",
    "plan_refusal",
]
