"""Windows: how long each race's real writer keeps its fault on disk, on this machine.

Each race copies a real writer's operations (``pytest_startup_guard/races/catalog.py`` and
``generic.py``). This times those operations, done by the real code where it is installed, from
the operation that puts the fault on disk to the one that takes it away, many times:

- ``pointer_swap``: huggingface_hub's own ``_create_symlink(blob, pointer)`` on a live pointer,
  its ``os.remove`` and ``os.symlink`` timed from inside (the window is between them);
- ``ref_rewrite``: ``refs/<revision>`` written in place as ``snapshot_download`` did up to
  1.30.0 (``with open(ref, "w") as f: f.write(commit)``): truncate to close;
- ``blob_rewrite``: a config-sized blob (1 KiB) copied in place with ``shutil.copyfile`` (what
  ``cp`` onto a file does): the whole call, an upper bound of truncate to close;
- ``dangling_pointer``: the blob removed, written back as ``blobs/<etag>.<hex>.incomplete`` and
  moved into place with huggingface_hub's own ``_chmod_and_move``: remove to move;
- ``lock_held``: huggingface_hub's ``WeakFileLock`` taken, the blob written and moved, released
  (the local part of a download; the network part cannot be timed offline);
- ``file_replace``: ``os.remove`` then create and write; ``file_rewrite``: truncate then write;
  ``partial_write``: ``urllib.request.urlretrieve`` of a ``file://`` URL into the final name
  (writes as it arrives); ``folder_move``: a folder renamed aside and back.

Each is timed quiet and beside twice as many CPU-bound processes as cores (a loaded CI runner):
the median with its 10-90 % spread, the 99th percentile and the longest. The figures are what
``Race.window`` cites; the default hold of ``on_access()`` is the window plus
``WINDOW_MARGIN`` (``races/triggers.py``).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
import types
import urllib.request
from collections.abc import Callable
from pathlib import Path

from harness import Figure, emit, figure, parse_args

from pytest_startup_guard.races.triggers import WINDOW_MARGIN

CONFIG = b'{"model_type": "gpt2", "n_layer": 12, "vocab_size": 50257}'.ljust(1024, b" ")
COMMIT = "816c0af4b3c5a0e1d2f3a4b5c6d7e8f9a0b1c2d3"


class Folder:
    """A hub-like layout for one file: a blob, a pointer to it, a ref."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.blob = root / "blobs" / "0123456789abcdef"
        self.pointer = root / "snapshots" / COMMIT / "config.json"
        self.ref = root / "refs" / "main"
        self.lock = root / ".locks" / "0123456789abcdef.lock"
        self.source = root / "source.json"
        for path in (self.blob, self.pointer, self.ref, self.lock):
            path.parent.mkdir(parents=True, exist_ok=True)
        self.blob.write_bytes(CONFIG)
        self.source.write_bytes(CONFIG)
        self.ref.write_text(COMMIT)
        os.symlink(os.path.relpath(self.blob, self.pointer.parent), self.pointer)
        self.plain = root / "cache" / "entry.json"
        self.plain.parent.mkdir()
        self.plain.write_bytes(CONFIG)


def pointer_swap(folder: Folder) -> Callable[[], float]:
    from huggingface_hub import file_download

    marks: dict[str, float] = {}

    def remove(path: str) -> None:
        os.remove(path)
        marks["opened"] = time.perf_counter()

    def symlink(src: str, dst: str, *args: object, **kwargs: object) -> None:
        os.symlink(src, dst, *args, **kwargs)  # type: ignore[arg-type]
        marks["closed"] = time.perf_counter()

    # The real function, its os.remove and os.symlink timed where they return.
    shim = types.SimpleNamespace(**{name: getattr(os, name) for name in dir(os)})
    shim.remove, shim.symlink = remove, symlink
    real_os = file_download.os

    def run() -> float:
        file_download.os = shim  # type: ignore[assignment]
        try:
            file_download._create_symlink(str(folder.blob), str(folder.pointer))
        finally:
            file_download.os = real_os
        return marks["closed"] - marks["opened"]

    return run


def ref_rewrite(folder: Folder) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        with open(folder.ref, "w") as handle:  # snapshot_download up to 1.30.0
            handle.write(COMMIT)
        return time.perf_counter() - start

    return run


def blob_rewrite(folder: Folder) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        shutil.copyfile(folder.source, folder.blob)
        return time.perf_counter() - start

    return run


def dangling_pointer(folder: Folder) -> Callable[[], float]:
    from huggingface_hub.file_download import _chmod_and_move

    def run() -> float:
        start = time.perf_counter()
        os.remove(folder.blob)
        incomplete = folder.blob.with_name(f"{folder.blob.name}.{os.urandom(8).hex()}.incomplete")
        incomplete.write_bytes(CONFIG)
        _chmod_and_move(incomplete, folder.blob)
        return time.perf_counter() - start

    return run


def lock_held(folder: Folder) -> Callable[[], float]:
    from huggingface_hub.file_download import _chmod_and_move
    from huggingface_hub.utils import WeakFileLock

    def run() -> float:
        with WeakFileLock(folder.lock):
            start = time.perf_counter()
            incomplete = folder.blob.with_name(
                f"{folder.blob.name}.{os.urandom(8).hex()}.incomplete"
            )
            incomplete.write_bytes(CONFIG)
            _chmod_and_move(incomplete, folder.blob)
            held = time.perf_counter() - start
        return held

    return run


def file_replace(folder: Folder) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        os.remove(folder.plain)
        with open(folder.plain, "wb") as handle:
            handle.write(CONFIG)
        return time.perf_counter() - start

    return run


def file_rewrite(folder: Folder) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        with open(folder.plain, "wb") as handle:
            handle.write(CONFIG)
        return time.perf_counter() - start

    return run


def partial_write(folder: Folder) -> Callable[[], float]:
    url = folder.source.as_uri()

    def run() -> float:
        start = time.perf_counter()
        urllib.request.urlretrieve(url, folder.plain)
        return time.perf_counter() - start

    return run


def folder_move(folder: Folder) -> Callable[[], float]:
    aside = folder.plain.parent.with_name("cache.old")

    def run() -> float:
        start = time.perf_counter()
        os.rename(folder.plain.parent, aside)
        os.rename(aside, folder.plain.parent)
        return time.perf_counter() - start

    return run


WRITERS: dict[str, Callable[[Folder], Callable[[], float]]] = {
    "pointer_swap": pointer_swap,
    "ref_rewrite": ref_rewrite,
    "blob_rewrite": blob_rewrite,
    "dangling_pointer": dangling_pointer,
    "lock_held": lock_held,
    "file_replace": file_replace,
    "file_rewrite": file_rewrite,
    "partial_write": partial_write,
    "folder_move": folder_move,
}


def _spin(stop: multiprocessing.synchronize.Event) -> None:
    while not stop.is_set():
        for _ in range(10_000):
            pass


def samples_of(name: str, repeats: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="bench-windows-") as tmp:
        run = WRITERS[name](Folder(Path(tmp)))
        for _ in range(min(20, repeats)):  # warm: imports, caches
            run()
        return [run() for _ in range(repeats)]


def spread(samples: list[float]) -> tuple[float, float, float, float, float]:
    """median, 10th and 90th percentiles, 99th percentile, longest (seconds)."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples), cuts[9], cuts[89], cuts[98], max(samples)


def main() -> None:
    args = parse_args(__doc__ or "")
    repeats, loaded_repeats = (50, 20) if args.quick else (2000, 500)
    figures: list[Figure] = []
    quiet = {name: samples_of(name, repeats) for name in WRITERS}
    stop = multiprocessing.Event()
    load = [
        multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    for process in load:
        process.start()
    try:
        time.sleep(0.5)
        loaded = {name: samples_of(name, loaded_repeats) for name in WRITERS}
    finally:
        stop.set()
        for process in load:
            process.join(timeout=5)
    for name in WRITERS:
        median, p10, p90, p99, longest = spread(quiet[name])
        figures.append(
            figure(
                f"window {name}: median (quiet)",
                median * 1e6,
                "us",
                detail=f"p10-p90 {p10 * 1e6:.0f}-{p90 * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us,"
                f" max {longest * 1e6:.0f} us, {len(quiet[name])} runs",
            )
        )
        median, p10, p90, p99, longest = spread(loaded[name])
        figures.append(
            figure(
                f"window {name}: p99 (2x CPU load)",
                p99 * 1e6,
                "us",
                target=f"< {WINDOW_MARGIN * 1e6:.0f} us",
                passed=None if args.quick else p99 < WINDOW_MARGIN,
                detail=f"median {median * 1e6:.0f} us, p10-p90 {p10 * 1e6:.0f}-{p90 * 1e6:.0f} us,"
                f" max {longest * 1e6:.0f} us, {len(loaded[name])} runs",
            )
        )
    emit(figures, args)
    for item in figures:
        print(f"  {item['figure']}: {item['detail']}")


if __name__ == "__main__":
    main()
