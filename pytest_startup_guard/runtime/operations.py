"""The names users give the file operations the child runtime sees, and the audit events behind
them (``protocol.ACCESS_EVENTS``): ``on_access(op="rename")``, ``fs_error(..., op="open")``.

One name per operation as the os module spells it; the functions that raise the same audit
event are the same operation (``os.replace`` is a rename, ``os.unlink`` a remove,
``os.ftruncate`` a truncate, ``os.fchmod`` and ``os.lchmod`` a chmod).
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError

# name -> audit event (CPython 3.8+)
OPERATIONS: dict[str, str] = {
    "open": "open",
    "listdir": "os.listdir",
    "scandir": "os.scandir",
    "rename": "os.rename",
    "mkdir": "os.mkdir",
    "rmdir": "os.rmdir",
    "remove": "os.remove",
    "symlink": "os.symlink",
    "link": "os.link",
    "truncate": "os.truncate",
    "chmod": "os.chmod",
    "flock": "fcntl.flock",
    "lockf": "fcntl.lockf",
}
# Other names of the same operations (the functions that raise the same audit event).
ALIASES: dict[str, str] = {
    "replace": "rename",
    "unlink": "remove",
    "ftruncate": "truncate",
    "fchmod": "chmod",
    "lchmod": "chmod",
}
_NAMES = {event: name for name, event in OPERATIONS.items()}
ACCEPTED = ", ".join(OPERATIONS) + " (or replace, unlink, ftruncate, fchmod, lchmod)"


def operation_name(event: str) -> str:
    """``os.rename`` -> ``rename``: how an access's operation is shown to users."""
    return _NAMES.get(event, event)


def describe_ops(events: tuple[str, ...]) -> str:
    """``op='rename'`` or ``op=('mkdir', 'rename')``: how ``op=`` was given, for a describe()."""
    names = tuple(operation_name(event) for event in events)
    return f"op={names[0]!r}" if len(names) == 1 else f"op={names!r}"


def operation_events(value: object, argument: str, where: str) -> tuple[str, ...]:
    """The audit events of ``value``: one operation's name or a list of them (``"rename"``,
    ``("mkdir", "rename")``), checked: an unknown name is an error naming it, ``where`` it was
    given and what is accepted."""
    names: Iterable[object]
    if isinstance(value, str):
        names = (value,)
    elif isinstance(value, (list, tuple, set, frozenset)):
        names = tuple(value)
        if not names:
            raise InvalidArgumentError(
                f"invalid {argument}={value!r} for {where}: expected an operation or a"
                f" non-empty list of them: {ACCEPTED}"
            )
    else:
        raise ArgumentTypeError(
            f"invalid {argument}={value!r} for {where}: expected an operation's name (str) or a"
            f" list of them: {ACCEPTED}"
        )
    events: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise ArgumentTypeError(
                f"invalid {argument}={value!r} for {where}: {name!r} is not an operation's"
                f" name; expected one of {ACCEPTED}"
            )
        key = ALIASES.get(name, name)
        if key not in OPERATIONS:
            raise InvalidArgumentError(
                f"invalid {argument}={name!r} for {where}: the child runtime sees no"
                f" operation of that name; expected one of {ACCEPTED} (stat, exists and access"
                " raise no audit event: no process can be stopped at them)"
            )
        if OPERATIONS[key] not in events:
            events.append(OPERATIONS[key])
    return tuple(events)
