"""Accesses made in native code: an ``LD_PRELOAD`` interposer (``interposer.c``) that reports a
process's libc file calls as the child runtime's access events, its build (``build``), and the
controller's rule that drops the libc call a Python access was already reported for
(``doubles``). Part of the runtime: keep this file free of imports.
"""
