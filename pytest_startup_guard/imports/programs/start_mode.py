"""pytest-startup-guard: apply a start-method mode before the start-up's own code.

The start-method checks copy this file, as ``sitecustomize.py``, into a private folder put
first on ``PYTHONPATH`` (``startmethods``). At interpreter start it takes the mode and the
record path out of the environment (``STARTUP_GUARD_START_MODE``,
``STARTUP_GUARD_START_RECORD``: ``startmethods._MODE_ENV`` and ``_RECORD_ENV``), applies the
mode, records the start method of every process the start-up starts, then runs the
``sitecustomize`` it shadows.
"""

import os as _os

TYPE_CHECKING = False  # not typing's: the interpreter under test imports only what it did
if TYPE_CHECKING:
    from typing import Any


def _apply(mode: str, record: str) -> None:
    import importlib
    import json
    import multiprocessing
    import multiprocessing.context

    kind, _, method = mode.partition(":")
    if kind == "default":
        # The default context's fallback: what get_context() picks while nothing is set.
        default: Any = multiprocessing.context._default_context
        default._default_context = multiprocessing.get_context(method)
    elif kind == "set":
        multiprocessing.set_start_method(method)
    pid = _os.getpid()
    used: list[str] = []

    def save() -> None:
        if _os.getpid() == pid:
            with open(record, "w") as out:
                json.dump({"mode": mode, "used": sorted(set(used))}, out)

    # Record the start method of every process the start-up starts (Popen.method).
    for name in ("popen_fork", "popen_spawn_posix", "popen_forkserver"):
        try:
            popen: Any = importlib.import_module("multiprocessing." + name).Popen
        except ImportError:
            continue

        def launch(self: "Any", process_obj: "Any", _original: "Any" = popen._launch) -> "Any":
            used.append(self.method)
            save()
            return _original(self, process_obj)

        popen._launch = launch
    save()


def _chain() -> None:
    """Run the sitecustomize this one shadows (Debian ships one), as if it came first."""
    import importlib.machinery
    import importlib.util
    import sys

    here = _os.path.dirname(_os.path.abspath(__file__))
    rest = [p for p in sys.path if _os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


# Only as the interpreter's sitecustomize: importing this file elsewhere changes nothing.
if __name__ == "sitecustomize":
    _mode = _os.environ.pop("STARTUP_GUARD_START_MODE", None)
    _record = _os.environ.pop("STARTUP_GUARD_START_RECORD", None)
    if _mode and _record:
        _apply(_mode, _record)
    _chain()
