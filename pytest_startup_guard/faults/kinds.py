"""What ``server_fleet.launch(faults=[...])`` takes: the one type of a launch's faults.

Port faults (``port_faults.py``: ``port_taken``, ``same_port``, ``port_stolen``), locks that do
not exclude (``lock_faults.py``) and faults on what the processes do (``process_faults.py``:
``fs_error``, ``network_fs``, ``interleave``, ``listen_late``). The launcher splits a list by
kind; each kind checks its own.
"""

from __future__ import annotations

from pytest_startup_guard.faults.lock_not_exclusive import LockNotExclusive
from pytest_startup_guard.faults.ports import PortFault
from pytest_startup_guard.faults.process import ProcessFault

Fault = PortFault | LockNotExclusive | ProcessFault
