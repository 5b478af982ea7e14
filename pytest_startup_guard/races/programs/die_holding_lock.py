"""Take filelock's soft lock ``sys.argv[1]`` and be killed holding it, as a crashed holder is.

Run by path by the ``stale_soft_lock`` stale lock (``races/locks.py``).
"""

import os
import signal
import sys

from filelock import SoftFileLock

lock = SoftFileLock(sys.argv[1])  # kept: a collected lock object releases itself
lock.acquire(timeout=5)
os.kill(os.getpid(), signal.SIGKILL)
