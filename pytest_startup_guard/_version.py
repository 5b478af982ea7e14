"""The plugin's version, in a module of its own so that any part can read it without importing
the package's public face (``__init__`` re-exports every part: an upward import)."""

__version__ = "0.1.0.dev0"
