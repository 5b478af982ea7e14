"""``import_race``'s measurement: import the module alone; its import time, attributes.

Run as ``python -c <this file's text> PARAMS`` (``runner.program_argv``), so that the cwd is
first on ``sys.path`` for the module under test. PARAMS is JSON: ``module``, ``attrs``,
``marker``. Prints the marker, then ``{"seconds", "preloaded", "missing"}`` as JSON.
"""

import json
import sys
import time

TYPE_CHECKING = False  # not typing's: the interpreter under test imports only what it did
if TYPE_CHECKING:
    from typing import Any


# At module level, not in a function: a module that fails to import shows one frame of this
# program in the traceback its error message quotes.
if __name__ == "__main__":
    params = json.loads(sys.argv[1])
    module = params["module"]
    preloaded = module in sys.modules
    namespace: "dict[str, Any]" = {}  # quoted: a module-level annotation is evaluated
    start = time.perf_counter()
    exec(compile(f"import {module} as probed", "<import-race>", "exec"), namespace)
    seconds = time.perf_counter() - start
    missing = []
    for attr in params["attrs"]:
        try:
            exec(compile(f"from {module} import {attr}", "<import-race>", "exec"), {})
        except ImportError as error:
            missing.append([attr, f"{type(error).__name__}: {error}"])
    report = {"seconds": seconds, "preloaded": preloaded, "missing": missing}
    print(params["marker"] + json.dumps(report), flush=True)
