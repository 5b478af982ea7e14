"""Who a message speaks for: every message's pid is its sender's, or a descendant's it proves.

The controller takes a hello's pid from the kernel (``SO_PEERCRED``), not from the message.
Every other message names a pid too (an access, a bind, a probe's close, a lock call, a
footprint, a bye, a reap), and the controller believes it only for its sender
(``SenderCheck.speaks_for``): a process speaks for itself, so one process under test cannot
put an access, a bind or an exit on another's account. The pid a message may name:

- its connection's own process: the kernel's pid of the peer (Linux), else the pid its hello
  named (the plan's folder is private: only this user connects); the pid a hello named is
  taken as the peer's own (the same process counted in another pid namespace);
- a process that descends from it now (the kernel's parent chain from that pid reaches the
  sender): a child that writes on its parent's connection, as a raw ``fork()`` that no at-fork
  handler saw would;
- in a ``reaped`` message, a process it may have reaped: one whose ancestors at its hello
  (``ProcessRecord.lineage``, from the kernel) or whose own ``ancestry`` included the sender;
  a reaped pid that never said hello cannot be checked once it is gone, and is kept apart in
  ``RuntimeController.reaped``, which no verdict reads (refused if that pid runs, and not as
  the sender's descendant).

Any other pid is refused: the message is dropped (a message that waits for its reply gets
"go on"), and the refusal is kept and fails the test, as a listener's failure does.

The test side only: standard library at import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_startup_guard.runtime.events import ProcessRecord
from pytest_startup_guard.runtime.process_identity import ancestors, start_time
from pytest_startup_guard.runtime.server import Connection

# The messages that name the pid they are about; a hello's is the kernel's, a release names none.
NAMING_OPS = frozenset({"access", "bind", "probe", "lock", "footprint", "bye", "reaped"})


@dataclass(frozen=True)
class Refusal:
    """A message refused: who sent it (None: no pid known for its connection), what it was and
    the pid it named."""

    sender: int | None
    op: str
    named: object

    def __str__(self) -> str:
        who = "a connection that never said hello" if self.sender is None else f"pid {self.sender}"
        about = f"pid {self.named}" if type(self.named) is int else f"{self.named!r}, not a pid"
        rule = (
            "a process may report the reap of its own descendants only"
            if self.op == "reaped"
            else "a process speaks only for itself and its descendants"
        )
        return f"refused a {self.op!r} message from {who} about {about} ({rule}): dropped"


def speaker(connection: Connection) -> int | None:
    """The pid of the process at the other end: the kernel's, else the one its hello named."""
    return connection.peer_pid if connection.peer_pid is not None else connection.hello_pid


def speaks_for(
    connection: Connection,
    op: str,
    named: object,
    record_of: Callable[[int], ProcessRecord | None],
) -> int | Refusal:
    """The pid a message of ``op`` from ``connection`` that names ``named`` is about, or the
    refusal (see the module). ``record_of(pid)``: the latest hello of that pid, if any."""
    sender = speaker(connection)
    if type(named) is not int or named <= 0 or sender is None:
        return Refusal(sender, op, named)
    if named in (sender, connection.hello_pid):
        return sender
    if sender in ancestors(named):
        return named
    if op == "reaped" and _may_have_reaped(sender, named, record_of(named)):
        return named
    return Refusal(sender, op, named)


def _may_have_reaped(sender: int, pid: int, record: ProcessRecord | None) -> bool:
    if record is None:  # never said hello: nothing to check it against once it is gone
        return start_time(pid) is None
    return sender in record.lineage or sender in record.ancestry or sender == record.ppid


__all__ = ["NAMING_OPS", "Refusal", "speaker", "speaks_for"]
