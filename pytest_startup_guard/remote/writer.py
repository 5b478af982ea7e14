"""The real writer: a helper process that runs huggingface_hub's own download into a test cache.

``HubRemote.writer(repo_id, call="snapshot_download", ...)`` returns a ``WriterCommand``: the
command line of this module run as a program (``python -m pytest_startup_guard.remote.writer``),
which imports huggingface_hub (the installed one, or a release folder put first on
``PYTHONPATH``) and makes the one call against the remote (``HF_ENDPOINT``) into the remote's
cache, one file at a time (``max_workers=1`` where the call takes it: threads would make the
order of its steps vary). ``server_fleet.explore_writer`` starts it under the child runtime and
pauses it at each of its file operations.

The program prints the path the call returned and exits 0; an exception of the call ends it
with its traceback and exit status 1, as a user's own script would.

``template_argv`` runs the same program as a template (``--serve``): it imports huggingface_hub
once, then forks one writer per line ``run OUTPUT`` on its standard input (the fork's output
goes to the file OUTPUT) and answers ``pid PID`` and, once that writer ended, ``exit PID CODE``.
An exploration runs many writers; the fork makes each one cost its download, not the import.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pytest_startup_guard.cache.hubcache import FakeHubCache

CALLS = ("snapshot_download", "hf_hub_download")  # what the writer can run
MODULE = "pytest_startup_guard.remote.writer"


@dataclass(frozen=True)
class WriterCommand:
    """A writer ``server_fleet.explore_writer`` can start: its command line, the environment it
    needs over the test process's own, and the cache it writes (whose operations are its
    steps). ``label`` names it in messages."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cache: FakeHubCache
    label: str
    release: Path | None = field(default=None)
    template_argv: tuple[str, ...] | None = field(default=None)

    def __str__(self) -> str:
        return self.label


def writer_command(
    env: Mapping[str, str],
    cache: FakeHubCache,
    repo_id: str,
    *,
    call: str = "snapshot_download",
    filename: str | None = None,
    revision: str = "main",
    force_download: bool = False,
    release: str | os.PathLike[str] | None = None,
    where: str = "hub_remote.writer()",
) -> WriterCommand:
    """The writer that runs ``call`` of huggingface_hub for ``repo_id`` with ``env`` (the
    remote's: its ``HF_ENDPOINT`` and ``cache``), checked: a clear error for a call it cannot
    run, a file ``hf_hub_download`` lacks, a release folder without huggingface_hub."""
    from pytest_startup_guard.checks import flag, shown, text
    from pytest_startup_guard.errors import ArgumentTypeError, InvalidArgumentError

    text("repo_id", repo_id, where, meaning="the repo to download, 'org/name'")
    if not isinstance(call, str) or call not in CALLS:
        kind = ArgumentTypeError if not isinstance(call, str) else InvalidArgumentError
        raise kind(
            f"invalid call={shown(call)} for {where}: expected one of {', '.join(map(repr, CALLS))}"
            " (the huggingface_hub function the writer runs)"
        )
    if call == "hf_hub_download":
        text("filename", filename, where, meaning="the file hf_hub_download fetches")
    elif filename is not None:
        raise InvalidArgumentError(
            f"invalid filename={filename!r} for {where}: call='snapshot_download' downloads every"
            " file of the repo; give filename= with call='hf_hub_download'"
        )
    text("revision", revision, where, meaning="a branch, tag or commit")
    flag("force_download", force_download, where)
    folder = None if release is None else _release_folder(release, where)
    environment = dict(env)
    if folder is not None:
        inherited = environment.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        environment["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), inherited) if p)
    environment.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    argv = (
        sys.executable,
        "-m",
        MODULE,
        call,
        repo_id,
        filename or "-",
        revision,
        "1" if force_download else "0",
    )
    what = f"{call}({repo_id!r}" + (f", {filename!r}" if filename else "") + ")"
    version = f"huggingface_hub from {folder}" if folder is not None else "huggingface_hub"
    label = f"{what} with {version}"
    return WriterCommand(argv, environment, cache, label, folder, (*argv, "--serve"))


def _release_folder(release: str | os.PathLike[str], where: str) -> Path:
    from pytest_startup_guard.checks import folder as checked_folder
    from pytest_startup_guard.errors import InvalidArgumentError

    found = checked_folder("release", release, where).absolute()
    if not (found / "huggingface_hub" / "__init__.py").is_file():
        raise InvalidArgumentError(
            f"invalid release={str(release)!r} for {where}: {found} holds no huggingface_hub"
            " package (expected a folder installed with `pip install --target FOLDER"
            " huggingface_hub==VERSION`, with huggingface_hub/__init__.py in it)"
        )
    return found


def main(arguments: list[str]) -> int:
    """The writer's process: ``CALL REPO_ID FILENAME|- REVISION FORCE(0|1) [--serve]``."""
    import inspect

    import huggingface_hub

    call, repo_id, filename, revision, force = arguments[:5]
    function = getattr(huggingface_hub, call)
    options: dict[str, object] = {"revision": revision}
    if force == "1":  # only when asked: snapshot_download has no force_download up to 0.10
        options["force_download"] = True
    if "max_workers" in inspect.signature(function).parameters:
        options["max_workers"] = 1  # one file at a time: the same steps in the same order
    given = (repo_id, filename) if call == "hf_hub_download" else (repo_id,)

    def run() -> None:
        path = function(*given, **options)
        print(f"{call} with huggingface_hub {huggingface_hub.__version__}: {path}", flush=True)

    if arguments[5:] == ["--serve"]:
        return _serve(run)
    run()
    return 0


def _serve(run: Callable[[], None]) -> int:
    """The template: a forked writer per ``run OUTPUT`` line, until standard input closes."""
    import traceback

    for line in sys.stdin:
        command, _, output = line.strip().partition(" ")
        if command != "run" or not output:
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(descriptor, 1)
                os.dup2(descriptor, 2)
                run()
                code = 0
            except BaseException:  # its traceback in its output, as an uncaught one would be
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(f"pid {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exit {pid} {os.waitstatus_to_exitcode(status)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
