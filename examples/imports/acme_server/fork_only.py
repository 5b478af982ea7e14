"""BAD: works only while the platform's default start method is ``fork``.

The worker's target is a closure: ``fork`` copies it into the child, ``spawn`` and
``forkserver`` must pickle it and cannot. It passes on Linux with CPython up to 3.13 and breaks
where the default differs (macOS: ``spawn``; CPython 3.14 on Linux: ``forkserver``).
"""

from __future__ import annotations

import multiprocessing


def main() -> None:
    greeting = "hello"

    def child() -> None:
        print(greeting)

    worker = multiprocessing.Process(target=child)
    worker.start()
    worker.join()
    if worker.exitcode != 0:
        raise SystemExit(f"worker failed with exit code {worker.exitcode}")
    print("ready")


if __name__ == "__main__":
    main()
