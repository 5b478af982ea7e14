"""Imported by the ``startup_guard_boot.pth`` line at interpreter start when a plan is set.

The .pth line itself checks ``STARTUP_GUARD_PLAN`` first, so a process without a plan never
imports this (or anything else of the plugin). A plan that is not live (its test is over, its
folder is not a private folder of this user) is ignored with one line on stderr
(``child.boot``); so is anything that goes wrong here: never more than one line.
"""

try:
    from pytest_startup_guard.runtime.child import boot

    boot()
except Exception as error:  # never stop an interpreter from starting
    import sys

    sys.stderr.write(f"startup-guard: child runtime did not start: {error!r}\n")
