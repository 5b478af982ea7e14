"""The bundled examples are a user's suite: they load the plugin with ``-p startup_guard``."""
