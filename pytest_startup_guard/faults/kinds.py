"""What ``server_fleet.launch(faults=[...])`` takes: the one type of a launch's faults.

Port faults (``port_taken.py``, ``same_port.py``, ``port_stolen.py``), locks that do not
exclude (``lock_not_exclusive.py``) and faults on what the processes do (``process.py``:
``fs_error``, ``network_fs``, ``interleave``, ``listen_late``). ``armed.ArmedFaults`` splits a
list by family; each family checks its own.
"""

from __future__ import annotations

from pytest_startup_guard.faults.lock_not_exclusive import LockNotExclusive
from pytest_startup_guard.faults.ports import PortFault
from pytest_startup_guard.faults.process import ProcessFault

Fault = PortFault | LockNotExclusive | ProcessFault
