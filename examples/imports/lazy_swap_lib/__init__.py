"""A stand-in for ``transformers``: a slow import that ends by swapping in a lazy module.

``transformers/__init__.py`` replaces ``sys.modules["transformers"]`` with a lazy module at its
end (transformers 5.24 on CPython 3.11; docs/imports.md). A thread that imports this package while another thread's import is still
running waits on the import lock, then receives the plain module below, which has no
``AutoThing``: ``from lazy_swap_lib import AutoThing`` fails with ``ImportError``.
"""

from __future__ import annotations

import importlib
import sys
import time
import types
from typing import Any

time.sleep(0.3)  # stands for a heavy import (transformers 5.24: about 0.6 s)


class _LazyModule(types.ModuleType):
    """Loads ``AutoThing`` from its submodule on first use."""

    def __getattr__(self, name: str) -> Any:
        if name == "AutoThing":
            value = importlib.import_module(f"{self.__name__}.things").AutoThing
            setattr(self, name, value)
            return value
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


_lazy = _LazyModule(__name__, __doc__)
_lazy.__file__ = __file__
_lazy.__path__ = __path__
_lazy.__spec__ = __spec__
sys.modules[__name__] = _lazy
