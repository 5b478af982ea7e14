"""``import_race``'s race: a background thread and the main thread import the module.

Run as ``python -c <this file's text> PARAMS`` (``runner.program_argv``), so that the cwd is
first on ``sys.path`` for the module under test. PARAMS is JSON: ``module``, ``attrs``,
``order``, ``delay``, ``suppress``, ``join_timeout``, ``marker``. Prints the marker, then
``{"errors", "spans"}`` as JSON: each thread's exception, and when its import ran.

Both imports are import statements (exec of compiled code), not importlib.import_module: only
the statement returns the module object it found before waiting on the import lock.
"""

import contextlib
import json
import sys
import threading
import time

TYPE_CHECKING = False  # not typing's: the interpreter under test imports only what it did
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any


class StaleModule(Exception):
    pass


class Race:
    """The two imports of one run, and what each thread saw."""

    def __init__(self, params: "dict[str, Any]") -> None:
        self.params = params
        self.module: str = params["module"]
        self.attrs: list[str] = params["attrs"]
        main_source = (
            f"from {self.module} import {', '.join(self.attrs)}"
            if self.attrs
            else f"import {self.module} as probed"
        )
        self.main_statement = compile(main_source, "<import-race main>", "exec")
        self.background_statement = compile(
            f"import {self.module} as probed", "<import-race background>", "exec"
        )
        self.errors: dict[str, str] = {}
        self.spans: dict[str, list[float]] = {}

    def attempt(self, thread: str, statement: "CodeType") -> None:
        namespace: dict[str, Any] = {}
        start = time.perf_counter()
        try:
            exec(statement, namespace)
            if thread == "background":
                for attr in self.attrs:
                    getattr(namespace["probed"], attr)
            if not self.attrs and namespace["probed"] is not sys.modules.get(self.module):
                raise StaleModule(
                    f"got a module object that is no longer sys.modules[{self.module!r}]"
                    " (it replaced itself while this thread waited)"
                )
        except BaseException as error:
            first_line = str(error).splitlines()[0] if str(error) else ""
            self.errors[thread] = f"{type(error).__name__}: {first_line}"
            raise
        finally:
            self.spans[thread] = [start, time.perf_counter()]

    def background(self) -> None:
        if self.params["order"] == "main first":
            time.sleep(self.params["delay"])
        if self.params["suppress"]:
            with contextlib.suppress(Exception):
                self.attempt("background", self.background_statement)
        else:
            self.attempt("background", self.background_statement)

    def run(self) -> None:
        thread = threading.Thread(
            target=self.background, name="import-race-background", daemon=True
        )
        thread.start()
        if self.params["order"] == "background first":
            time.sleep(self.params["delay"])
        with contextlib.suppress(BaseException):
            self.attempt("main", self.main_statement)
        thread.join(self.params["join_timeout"])
        if thread.is_alive():
            self.errors.setdefault(
                "background", "TimeoutError: the background import did not finish"
            )


def main() -> None:
    params = json.loads(sys.argv[1])
    race = Race(params)
    race.run()
    report = {"errors": race.errors, "spans": race.spans}
    print(params["marker"] + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
