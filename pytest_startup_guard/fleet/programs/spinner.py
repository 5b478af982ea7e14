"""One CPU-bound process of ``cpu_load``: ``spinner.py LIMIT BYTES CPUS``.

Spins on a CPU (pinned to ``CPUS``, a comma-separated list, where given) until ``LIMIT`` seconds
have passed, keeping ``BYTES`` of memory resident by touching a byte of each page every second.
Run by path with the standard library only: it must start fast and import nothing of the plugin.
"""

import os
import sys
import time

cpus = [int(cpu) for cpu in sys.argv[3].split(",") if cpu]
if cpus:
    os.sched_setaffinity(0, cpus)
end = time.monotonic() + float(sys.argv[1])
ballast = bytearray(int(sys.argv[2]))
touched = 0.0
x = 0
while True:
    for _ in range(20000):
        x = (x * 31 + 7) % 1000003
    now = time.monotonic()
    if now >= end:
        break
    if ballast and now - touched >= 1.0:
        ballast[::4096] = b"\1" * len(ballast[::4096])
        touched = now
