"""Start-ups built to break the equivalence of access points, for ``bench_explore``'s
``agreement`` figure: each is explored with every point run and with opt-in pruning, and the
two must end alike at every point.

One server (``SERVER``) runs a start-up described by a JSON spec: a list of steps, each reading
one file of ``acme/tiny`` with the real ``hf_hub_download`` and ``open``, after some work,
one or more times, each part retried or not, optional or required. ``variants(n)`` draws ``n``
such start-ups, the same ones every run (seeded), over every kind that once broke pruning: a
retry on the download and not on the read of its path (and the reverse), work between files
longer than the window, a file read several times from one line with one pass unguarded,
optional files beside required ones, and fleets of 1, 2 and 4.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from typing import Any

SERVER = """
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
from huggingface_hub import hf_hub_download

port, steps = int(sys.argv[1]), json.loads(sys.argv[2])

def attempt(action, retry):
    for _ in range(20 if retry else 1):
        try:
            return action()
        except Exception:
            if not retry:
                raise
            time.sleep(0.05)
    raise RuntimeError("gave up")

def read(path):
    with open(path) as handle:
        return json.load(handle)

for step in steps:
    for number in range(step["passes"]):
        time.sleep(step["work"])
        guarded = step["optional"] or number != step["unguarded"]
        try:
            path = attempt(lambda: hf_hub_download("acme/tiny", step["file"]), step["download_retry"])
            attempt(lambda: read(path), step["open_retry"])
        except Exception:
            if not guarded:
                raise

class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""

FILES = ("config.json", "part-0.json", "part-1.json")
RACES = ("pointer_swap", "ref_rewrite")
HOLD = 0.3  # the window of every point: works of 0.6 s outlast it, retries of 1 s outlive it


@dataclass(frozen=True)
class Variant:
    """One start-up to explore: its steps, the race and the file it races, the fleet's size."""

    number: int
    steps: tuple[dict[str, Any], ...]
    race: str
    filename: str
    count: int

    def argv(self) -> list[str]:
        return [sys.executable, "-c", SERVER, "{port}", json.dumps(list(self.steps))]

    def words(self) -> str:
        parts = []
        for step in self.steps:
            how = [
                "download retried" if step["download_retry"] else "",
                "read retried" if step["open_retry"] else "",
                f"{step['work']} s of work" if step["work"] else "",
                "optional" if step["optional"] else "",
                f"{step['passes']} passes, #{step['unguarded'] + 1} unguarded"
                if step["passes"] > 1
                else "",
            ]
            parts.append(f"{step['file']} ({', '.join(w for w in how if w) or 'plain'})")
        return f"{self.race} on {self.filename}, {self.count} member(s): " + "; ".join(parts)


def _step(draw: random.Random, name: str) -> dict[str, Any]:
    passes = draw.choice((1, 1, 3))
    return {
        "file": name,
        "download_retry": draw.random() < 0.5,
        "open_retry": draw.random() < 0.5,
        "work": draw.choice((0.0, 0.0, 0.6)),
        "optional": draw.random() < 0.25,
        "passes": passes,
        "unguarded": draw.randrange(passes) if passes > 1 else 0,
    }


def variants(how_many: int, seed: int = 41) -> list[Variant]:
    """``how_many`` start-ups, drawn the same way every run; the fleet sizes cycle 1, 2, 4."""
    draw = random.Random(seed)
    found = []
    for number in range(how_many):
        names = draw.sample(FILES, draw.choice((2, 3)))
        steps = tuple(_step(draw, name) for name in names)
        found.append(
            Variant(number, steps, draw.choice(RACES), draw.choice(names), (1, 2, 4)[number % 3])
        )
    return found


__all__ = ["FILES", "HOLD", "SERVER", "Variant", "variants"]
