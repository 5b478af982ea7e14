"""Whether a member forked from a template would start as a cold start of it would, or why not.

A template reports what its imports read (``observe.py``: arguments, variables, randomness, the
clock, each with the module whose import read it) and where each module it loaded came from.
From those and the launch's members, this module says, in the user's words, what would make a
fork differ from a cold start (``refusals``), or nothing:

- code of the test's own project (a file under the rootdir, the working folder or the app's
  folder, not an installed package) that ``preload=`` does not name: a template imports none;
- a variable that differs per test or member (``per_test``) read by a module that is not pointed
  at the member's values after the fork (``cache.env.repoint_libraries`` does that for
  huggingface_hub, transformers, datasets and diffusers): the module would keep the template's;
- a variable every member shares is part of the template's key; a member whose own value
  differs (``env=`` per member) would keep the template's;
- ``sys.argv`` read at import: the template imported with member 0's arguments; a member whose
  read arguments differ would keep them (``argv_differs``: a template imported with member 0's
  would do for it, so a new one is started for member 0 before the launch is refused);
- per-process randomness drawn, or the wall clock read, at import, unless the plugin draws it
  again in each member (``observe.REDRAWN``).

A loop over the whole environment (tqdm reads its ``TQDM_*`` settings so) is taken for what it
is in practice, a read of the module's own prefix: the variables every member shares are in the
key, and the loop refuses nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_startup_guard.cache.env import REPOINTED_LIBRARIES
from pytest_startup_guard.fleet.warm.observe import ALL, Observation, redrawn

# Variables that differ from test to test and member to member (the test's cache, the loopback
# hub's address, online or offline, the plugin's own): not part of a template's key. A forked
# member has its libraries re-pointed for the cache's (``REPOINTED_NAMES``); any other module
# that reads one at import keeps the template's value, and the launch is refused.
PER_TEST_PREFIXES = ("STARTUP_GUARD_",)
REPOINTED_NAMES = frozenset(
    {
        "HF_HOME",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_ASSETS_CACHE",
        "HF_XET_CACHE",
        "HF_MODULES_CACHE",
        "HF_DATASETS_CACHE",
        "HF_ENDPOINT",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "HF_HUB_DISABLE_TELEMETRY",
        "HF_HUB_DISABLE_UPDATE_CHECK",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN",
        "DISABLE_TELEMETRY",
        "DO_NOT_TRACK",
    }
)
PER_TEST_NAMES = REPOINTED_NAMES | {"NO_PROXY", "no_proxy", "PYTEST_CURRENT_TEST"}
SHOWN = 60  # characters of a value a message shows


def per_test(name: str) -> bool:
    return name.startswith(PER_TEST_PREFIXES) or name in PER_TEST_NAMES


@dataclass(frozen=True)
class Member:
    """One member as a fork would make it: ``sys.argv`` at its imports and its environment
    (less the plugin's per-member variables)."""

    argv: tuple[str, ...]
    env: Mapping[str, str]


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 4] + "...'"


def _by(entry: Observation) -> str:
    return f"module {entry['module']!r} ({entry['where']})"


def installed(path: str) -> bool:
    return "-packages" + os.sep in path


def project_root(path: str | None, roots: Sequence[str]) -> str | None:
    """The project folder ``path`` lies under, where it is the test's own code (not an
    installed package); None otherwise."""
    if path is None or installed(path):
        return None
    for root in roots:
        if path.startswith(root.rstrip(os.sep) + os.sep):
            return root
    return None


def named_by(name: str, named: Sequence[str]) -> bool:
    """``name`` is a module ``preload=`` names, or a package of one (imported with it)."""
    return any(wanted == name or wanted.startswith(name + ".") for wanted in named)


def unnamed_project_code(
    files: Mapping[str, str | None], roots: Sequence[str], named: Sequence[str]
) -> list[str]:
    causes = []
    for name, path in files.items():
        root = project_root(path, roots)
        if root is not None and not named_by(name, named):
            causes.append(
                f"module {name!r} ({path}) is the test's own code (under {root}) and preload="
                " does not name it: a template imports no code of the project unless preload="
                " names it"
            )
    return causes


def refusals(
    observed: Sequence[Observation],
    files: Mapping[str, str | None],
    roots: Sequence[str],
    named: Sequence[str],
    members: Sequence[Member],
) -> list[str]:
    """Why members forked from this template would not start as cold ones, whichever
    arguments the template imported with (``argv_differs`` says those)."""
    causes = unnamed_project_code(files, roots, named)
    for entry in observed:
        kind, what = entry["kind"], entry["what"]
        if kind == "env" and what != ALL:
            causes += _variable(entry, members)
        elif kind == "random" and not redrawn(entry["module"]):
            causes.append(
                f"{_by(entry)} drew per-process randomness at its import ({what}): every fork"
                " would keep the template's draw, where each cold start draws its own"
            )
        elif kind == "clock":
            causes.append(
                f"{_by(entry)} read the wall clock at its import ({what}): a time-based id or"
                " start time would be the template's in every member"
            )
    return list(dict.fromkeys(causes))


def _variable(entry: Observation, members: Sequence[Member]) -> list[str]:
    name, seen = entry["what"], entry.get("value")
    if per_test(name):
        library = entry["module"].split(".", 1)[0] in REPOINTED_LIBRARIES
        if library and name in REPOINTED_NAMES:
            return []  # the fork points the library at the member's value
        template = f"the template's ({_shown(seen)})" if seen is not None else "it unset"
        return [
            f"{_by(entry)} read {name} at its import: it would keep {template} in every member,"
            f" where each member has its test's (after a fork only {', '.join(REPOINTED_LIBRARIES)}"
            " are pointed at a member's cache)"
        ]
    for index, member in enumerate(members):
        if member.env.get(name) != seen:
            return [
                f"{_by(entry)} read {name} at its import: member {index} has"
                f" {name}={_shown(member.env.get(name))}, the template imported with"
                f" {_shown(seen)}"
            ]
    return []


def _read_part(what: str, argv: Sequence[str]) -> Sequence[str]:
    if what == "sys.argv[0]":
        return argv[:1]
    if what.startswith("sys.argv[") and what.endswith(":]"):
        return argv[int(what[len("sys.argv[") : -2]) :]
    return argv


def argv_differs(
    observed: Sequence[Observation], template_argv: Sequence[str], members: Sequence[Member]
) -> list[tuple[int, str]]:
    """(member index, why) for each member whose arguments differ, where a module read them at
    import, from those the template imported with."""
    found = []
    for entry in observed:
        if entry["kind"] != "argv":
            continue
        what = entry["what"]
        shown = "sys.argv" if what == ALL else what
        kept = _read_part(what, template_argv)
        for index, member in enumerate(members):
            own = _read_part(what, member.argv)
            if list(own) != list(kept):
                found.append(
                    (
                        index,
                        f"{_by(entry)} read {shown} at its import: a fork keeps what the"
                        f" template read ({' '.join(kept)!r}), not member {index}'s"
                        f" ({' '.join(own)!r})",
                    )
                )
    return found


__all__ = [
    "PER_TEST_NAMES",
    "Member",
    "argv_differs",
    "installed",
    "per_test",
    "project_root",
    "refusals",
    "unnamed_project_code",
]
