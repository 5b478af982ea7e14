"""The same slow import without the swap: safe to import from any thread.

A second thread waits on the import lock and then receives this module, complete.
"""

from __future__ import annotations

import time

time.sleep(0.3)  # the same heavy import as lazy_swap_lib

from plain_lib.things import AutoThing  # noqa: E402

__all__ = ["AutoThing"]
