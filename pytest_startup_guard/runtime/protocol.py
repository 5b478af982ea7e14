"""What the child runtime and the controller say to each other.

Transport: a Unix stream socket, one connection per process. A message is a dict of plain
values (str, int, float, bool, None, lists and dicts of them), sent as a 4-byte big-endian
length and the ``marshal`` of the dict. Every message from a child gets exactly one reply, so a
child that reports an access waits until the test side has done what it wanted to do at that
access (open a race window): that wait is what makes a trigger deterministic. Notices, marked
``noreply``, get none:

- ``released``: ``t``, when a fleet member left the start barrier;
- ``bye``: ``pid``, ``t``, ``code`` (the exit status the process knows it exits with, or None)
  and ``cause`` (its first uncaught exception, ``"TypeName: message"``, or None): sent once, as
  the process exits;
- ``reaped``: ``pid`` (a child), ``code`` (``os.waitstatus_to_exitcode``: negative for a
  signal), ``t`` and ``by`` (the reaping parent): sent by a parent when its wait reaped a child.
- ``footprint``: ``pid``, ``t``, ``ev`` (one of ``FOOTPRINT_EVENTS``), ``path`` (the path it
  changes, or the address it reaches) and ``source`` (``os.rename``: the old name; ``os.link``,
  ``os.symlink``: what the new name points at; else None): sent before the operation, only by a
  process whose hello reply said ``footprint`` (``RuntimeController.record_footprint``).

The reply to an ``access`` (``ev``, ``path``, ``other``: a rename's new name or a link's
source, else None; ``again``: it asks again after a ``wait``) is ``{"ok": 1}``, or with
``"errno": N``: the call fails with that errno, as the system call would (the child raises
``OSError(N, strerror, path)`` from its audit hook, which aborts the call), or with
``"wait": seconds``: the child sleeps that long (at most 50 ms at a time) and asks again.

A ``probe`` (``host``, ``port``, ``pid``, ``t``, ``tid``, ``again``), sent only by a process whose
hello reply said ``probes`` (``RuntimeController.report_probes``), tells that it just closed a
TCP socket it had bound to ``host:port`` (``runtime/child/ports.py``); its close returns once the
reply came: ``{"ok": 1}``, or ``"wait": seconds`` to sleep that long and ask again (``again``).

A ``lock`` (``path``, ``how``: ``"flock"`` or ``"lockf"``, ``acquire``: False for ``LOCK_UN``,
``exclusive``, ``pid``, ``t``, ``tid``, ``again``), sent only by a process whose hello reply
listed ``locks`` (paths, ``RuntimeController.fault_locks``), tells that it called ``flock`` or
``lockf`` on a file at or under one of them, which locks nothing (``runtime/child/locks.py``);
the call returns once the reply came: ``{"ok": 1}``, or ``"wait": seconds`` to sleep that long
and ask again (``again``).

Children import this at boot, before any user code: it uses built-in modules only (``marshal``,
``_socket``), no json, socket or typing, which would cost tens of milliseconds per process.
"""

from __future__ import annotations

import marshal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PLAN_ENV = "STARTUP_GUARD_PLAN"  # hex of a marshalled dict: socket, dumps, timeouts
MEMBER_ENV = "STARTUP_GUARD_MEMBER"  # "<group>:<index>" for fleet members and their descendants
ANCESTRY_ENV = "STARTUP_GUARD_ANCESTRY"  # comma-separated pids of the Python ancestors under test
# "<run id>:<tree id>" in every process the plugin starts, and so in all they start (run_marker)
RUN_ENV = "STARTUP_GUARD_RUN"
PROTOCOL_VERSION = 3  # 3: bye and reaped
_MARSHAL_VERSION = 4  # stable for plain values across CPython 3.x

# The audit events that count as an access under a watched folder: every file operation that
# CPython audits (3.8+). Stat-like calls (os.stat, os.lstat, os.path.exists, os.access,
# os.readlink) raise no audit event at all (CPython 3.11). The path of an access is its first
# argument, except: os.symlink and os.link name what they create second (the new name), and
# fcntl.flock/fcntl.lockf name a descriptor (its path is read from /proc/self/fd).
ACCESS_EVENTS = frozenset(
    {
        "open",
        "os.listdir",
        "os.scandir",
        "os.rename",  # also os.replace
        "os.mkdir",
        "os.rmdir",
        "os.remove",  # also os.unlink
        "os.symlink",
        "os.link",
        "os.truncate",  # also os.ftruncate
        "os.chmod",  # also os.fchmod, os.lchmod
        "fcntl.flock",
        "fcntl.lockf",
    }
)
# Raised by the real writer's process (``child.steps``, only where ``WRITER_STEPS_ENV`` is set)
# right AFTER an open for writing returned: ``(path, mode)``. Reported as an access of its own,
# a pause point between an open that truncates and the first write (``open(ref, "w")``).
OPENED_EVENT = "startup_guard.opened"
WRITER_STEPS_ENV = "STARTUP_GUARD_WRITER_STEPS"  # "1": wrap the opens (``child.steps.install``)
# "1": each access report also says which code made it (``site``: the call stack's files and
# lines, hashed) and whether an open writes (``writes``). Set for an exploration's clean run
# only, which groups its access points by them (``races/point_groups.py``).
ACCESS_SITES_ENV = "STARTUP_GUARD_ACCESS_SITES"
# The access events whose first argument is a descriptor, not a path.
DESCRIPTOR_EVENTS = frozenset({"fcntl.flock", "fcntl.lockf"})
# Looks at a path, which CPython does not audit: the child runtime raises these itself
# (``child/looks.py``). Reported like accesses, but heard only by the listeners that ask
# (``RuntimeListener.hears_looks``): a look is no access point, read or change.
LOOK_EVENTS = frozenset({"os.stat", "os.lstat", "os.access", "os.readlink"})
# The access events that name the path they create second: (src, dst, ...).
SECOND_PATH_EVENTS = frozenset({"os.symlink", "os.link"})

# The audit events of a process's footprint: what it changes on disk (an "open" counts only
# with a flag that writes) and what it reaches on the network. Hooked only in a process asked
# to report them, so that other runs pay nothing for them.
FOOTPRINT_EVENTS = frozenset(
    {
        "open",
        "os.rename",  # also os.replace
        "os.mkdir",
        "os.remove",  # also os.unlink
        "os.rmdir",
        "os.symlink",
        "os.link",
        "os.truncate",  # also os.ftruncate
        "os.chmod",  # also os.fchmod, os.lchmod
        "socket.connect",
        "socket.getaddrinfo",  # a name looked up: the DNS query is not a connect of this process
    }
)


def encode(message: dict[str, Any]) -> bytes:
    payload = marshal.dumps(message, _MARSHAL_VERSION)
    return len(payload).to_bytes(4, "big") + payload


def decode(payload: bytes) -> dict[str, Any]:
    message = marshal.loads(payload)
    if not isinstance(message, dict):
        raise ValueError(f"not a message: {payload[:40]!r}")
    return message


def encode_plan(plan: dict[str, Any]) -> str:
    return marshal.dumps(plan, _MARSHAL_VERSION).hex()


def decode_plan(text: str) -> dict[str, Any] | None:
    try:
        plan = marshal.loads(bytes.fromhex(text))
    except (ValueError, EOFError, TypeError):
        return None
    return plan if isinstance(plan, dict) and "socket" in plan else None


class FrameReader:
    """Splits a byte stream into message payloads, keeping what is left over."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        frames = []
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "big")
            if len(self.buffer) < 4 + size:
                break
            frames.append(self.buffer[4 : 4 + size])
            self.buffer = self.buffer[4 + size :]
        return frames
