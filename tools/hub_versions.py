"""Which huggingface_hub releases are open to which race, read from the released wheels.

Run by hand or in a scheduled job, never by ``make test`` (it downloads wheels)::

    python tools/hub_versions.py                 # scan + bisect, print the table, update the JSON
    python tools/hub_versions.py --empirical     # measure the cells in EMPIRICAL_CELLS (venvs)
    python tools/hub_versions.py --write-docs    # render docs/hub-versions.md from the JSON

The scan lists the releases with ``pip index versions``, downloads wheels with ``pip download
--no-deps`` into ``--cache`` and reads the writer functions straight out of the wheel zip with
``ast``: nothing from a wheel is imported. It classifies every ``--step``-th release, then
bisects between neighbours whose verdict or code form differs, so every change is pinned to the
exact first release (in version order) with O(log n) extra wheels. A change that is made and
undone again between two sampled releases with the same form would be missed: lower ``--step``
to rule that out.

Each race has one rule (``rule_<race>``) over the sources of a wheel; it returns a ``Cell``:
``open`` or ``closed``, a short label of the code form it found (``form``) and the evidence
lines (``path:line: code``). The rules are documented in ``RULES`` and in the docs page.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "hub_versions.json"
DOCS = ROOT / "docs" / "hub-versions.md"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / (
    "startup-guard-hub-wheels"
)
SINCE = "0.8.1"  # the first release with the blobs/refs/snapshots cache layout

FILE_DOWNLOAD = "huggingface_hub/file_download.py"
SNAPSHOT_DOWNLOAD = "huggingface_hub/_snapshot_download.py"
CACHE_MANAGER = "huggingface_hub/utils/_cache_manager.py"
MODULES = (FILE_DOWNLOAD, SNAPSHOT_DOWNLOAD, CACHE_MANAGER)

OPEN, CLOSED = "open", "closed"

RULES: dict[str, str] = {
    "pointer_swap": (
        "open iff `_create_symlink` (`_create_relative_symlink` before 0.13.2) calls `os.remove(dst)`"
        " before `os.symlink`, and the cache download (`_hf_hub_download_to_cache_dir`, before"
        " 0.23 `hf_hub_download`) calls it on `pointer_path` outside a `with ...Lock(...)` block or"
        " without an enclosing `if not os.path.exists(pointer_path)`: then a live pointer is"
        " removed and re-created (after a `force_download`, or by a second process creating the"
        " same pointer at the same time)."
    ),
    "ref_rewrite": (
        "open iff a ref writer writes `refs/<revision>` in place (`open(ref, 'w')` or"
        " `ref.write_text`) rather than a temporary file moved with `os.replace`. Writers: the ref"
        " helper of `hf_hub_download` (`_cache_commit_hash_for_specific_revision`, inline in"
        " `hf_hub_download` before 0.9.0) and `snapshot_download`. The form says whether the write"
        " happens on every call or only when the ref is missing or names another commit."
    ),
    "blob_rewrite": (
        "open iff the cache download opens the blob itself for writing (`open(blob_path, 'w…')`,"
        " `shutil.copyfile(…, blob_path)`); closed when it writes a temporary or `.incomplete`"
        " file and moves it into place (evidence: the move)."
    ),
    "dangling_pointer": (
        "open iff `DeleteCacheStrategy.execute` (behind `scan_cache_dir().delete_revisions()` and"
        " `huggingface-cli delete-cache`) deletes blobs before the snapshots that point to them;"
        " closed when snapshots go first, or when the release has no cache deletion."
    ),
    "lock_held": (
        "open iff the cache download holds its file lock on `.locks/<repo folder>/<etag>.lock`,"
        " the file the race holds; closed when it locks another file (`blobs/<etag>.lock`)."
    ),
}
RACE_NAMES = tuple(RULES)

# What the table cannot say, read in the same sources; rendered under the table.
NOTES: dict[str, str] = {
    "pointer_swap": (
        "from 0.32.0 `_create_symlink` still removes, then links, but the download calls it only"
        " under the blob's `WeakFileLock` and only when the pointer is missing; a live pointer is"
        " then swapped only where that lock does not exclude other processes, and only while two"
        " processes create the same missing pointer. Before: `force_download` re-created the live"
        " pointer up to 0.24.6, and the blob-present path ran outside the lock up to 0.31.4."
    ),
    "ref_rewrite": (
        "`snapshot_download` truncated and rewrote `refs/<branch>` on every call (even with the"
        " same commit) up to 1.30.0, and uses the atomic helper from 1.31.0; the helper of"
        " `hf_hub_download` wrote in place on every call up to 0.11.1, only when the ref was"
        " missing or named another commit from 0.12.0, and atomically from 1.18.0."
    ),
    "blob_rewrite": (
        "huggingface_hub never writes a blob in place: the race models third-party tools (rsync"
        " --inplace, cp onto an existing file). Without symlink support (Windows without"
        " developer mode) `_create_symlink` copies the blob onto the pointer instead."
    ),
    "dangling_pointer": (
        "`delete_revisions().execute()` removes snapshots before blobs, and only blobs no other"
        " scanned revision points to. A whole repo goes with one `shutil.rmtree`, in directory"
        " order, so `blobs/` can go before `snapshots/` — but then the repo is gone for good, a"
        " persistent fault. From 1.32.0 `_replace_no_matter_what` (a forced download onto a"
        " mount that refuses to replace an existing file) renames the old blob away before"
        " moving the new one in: the blob is absent for a moment on those mounts. Otherwise the"
        " race models third-party cleaners (tmp reapers, `find blobs -atime -delete`), a pointer"
        " added between the scan and the deletion, and shared file systems that show the link"
        " before the blob."
    ),
    "lock_held": (
        "readers of the cache take no lock in any release; only code that takes the same lock"
        " (a download, a writer) meets the race. Up to 0.18.0 the download locked"
        " `blobs/<etag>.lock`, a file the race does not hold; `WeakFileLock` from 0.22.0."
    ),
}


# -- reading sources -------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    verdict: str  # OPEN or CLOSED
    form: str  # a short label of the code form the rule found; no line numbers
    evidence: tuple[str, ...]  # "path:line: code"

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "form": self.form, "evidence": list(self.evidence)}

    @property
    def signature(self) -> tuple[str, str]:
        return (self.verdict, self.form)


class Module:
    """One source file of a wheel, parsed."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.lines = text.splitlines()
        self.tree = ast.parse(text)
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node

    def function(self, *names: str) -> ast.FunctionDef | None:
        """The last definition of the first of ``names`` that is defined (skips overloads)."""
        for name in names:
            found = [
                node
                for node in ast.walk(self.tree)
                if isinstance(node, ast.FunctionDef) and node.name == name and len(node.body) > 1
            ]
            found = found or [
                node
                for node in ast.walk(self.tree)
                if isinstance(node, ast.FunctionDef) and node.name == name
            ]
            if found:
                return max(found, key=lambda node: node.lineno)
        return None

    def where(self, node: ast.AST) -> str:
        line = getattr(node, "lineno", 1)
        return f"{self.path}:{line}: {self.lines[line - 1].strip()}"

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parents:
            node = self.parents[node]
            yield node


def _unparse(node: ast.AST | None) -> str:
    return "" if node is None else ast.unparse(node)


def _calls(node: ast.AST) -> list[ast.Call]:
    found = [sub for sub in ast.walk(node) if isinstance(sub, ast.Call)]
    return sorted(found, key=lambda call: (call.lineno, call.col_offset))


def _name(call: ast.Call) -> str:
    return _unparse(call.func)


def _arg(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    if len(call.args) > index:
        return call.args[index]
    return next((kw.value for kw in call.keywords if kw.arg == keyword), None)


def _mode(call: ast.Call, index: int) -> str:
    mode = _arg(call, index, "mode")
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else "r"


def _writes(mode: str) -> bool:
    return any(flag in mode for flag in "wa+x")


def modules_of(sources: Mapping[str, str]) -> dict[str, Module]:
    return {path: Module(path, text) for path, text in sources.items()}


def read_wheel(wheel: Path) -> dict[str, str]:
    """The sources the rules read, straight from the wheel zip (missing modules are left out)."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        return {path: archive.read(path).decode() for path in MODULES if path in names}


# -- the rules -------------------------------------------------------------------------------


def _cache_download(fd: Module) -> ast.FunctionDef | None:
    return fd.function("_hf_hub_download_to_cache_dir", "hf_hub_download")


def _no(path: str, what: str) -> Cell:
    return Cell(CLOSED, f"no {what}", (f"{path}: no {what}",))


def _download_module(sources: Mapping[str, str]) -> tuple[Module, ast.FunctionDef] | Cell:
    """``file_download`` and its cache-download function, or the closed cell saying which is
    missing (a release without them cannot produce a download's window)."""
    fd = modules_of(sources).get(FILE_DOWNLOAD)
    if fd is None:
        return _no(FILE_DOWNLOAD, "file_download module")
    caller = _cache_download(fd)
    if caller is None:
        return _no(fd.path, "cache download")
    return fd, caller


def rule_pointer_swap(sources: Mapping[str, str]) -> Cell:
    mods = modules_of(sources)
    fd = mods.get(FILE_DOWNLOAD)
    if fd is None:
        return _no(FILE_DOWNLOAD, "file_download module")
    writer = fd.function("_create_symlink", "_create_relative_symlink")
    caller = _cache_download(fd)
    if writer is None or caller is None:
        return _no(fd.path, "pointer writer")
    ops = _calls(writer)
    remove = next((c for c in ops if _name(c) in ("os.remove", "os.unlink")), None)
    link = next((c for c in ops if _name(c) == "os.symlink"), None)
    if link is None or remove is None or remove.lineno > link.lineno:
        return Cell(CLOSED, "pointer made without removing one", (fd.where(link or writer),))
    labels: set[str] = set()
    unguarded: list[str] = []
    guarded: list[str] = []
    for call in _calls(caller):
        if _name(call) != writer.name or _unparse(_arg(call, 1, "dst")) != "pointer_path":
            continue
        above = list(fd.ancestors(call))
        locked = any(
            isinstance(node, ast.With)
            and any(
                isinstance(item.context_expr, ast.Call)
                and _name(item.context_expr).endswith("Lock")
                for item in node.items
            )
            for node in above
        )
        checked = any(
            isinstance(node, ast.If)
            and re.search(
                r"not\s+os\.path\.(l?exists|islink)\(\s*pointer_path", _unparse(node.test)
            )
            for node in above
        )
        if not locked:
            labels.add("re-creates pointers outside the blob lock")
        elif not checked:
            labels.add("re-creates the pointer after every download")
        (guarded if locked and checked else unguarded).append(fd.where(call))
    remove_line = fd.where(remove)
    if labels:
        return Cell(OPEN, "; ".join(sorted(labels)), (remove_line, *unguarded))
    if not guarded:
        return _no(fd.path, "pointer creation in the cache download")
    return Cell(
        CLOSED, "creates a pointer only under the lock, only when missing", (remove_line, *guarded)
    )


def _ref_writes(mod: Module, fn: ast.FunctionDef) -> list[tuple[str, ast.Call]]:
    found: list[tuple[str, ast.Call]] = []
    for call in _calls(fn):
        name = _name(call)
        if name == "open" and _writes(_mode(call, 1)) and "ref" in _unparse(_arg(call, 0, "file")):
            found.append(("in place", call))
        elif name.endswith(".write_text") and isinstance(call.func, ast.Attribute):
            if "ref" in _unparse(call.func.value):
                found.append(("in place", call))
        elif name in ("os.replace", "os.rename") and "ref" in _unparse(_arg(call, 1, "dst")):
            found.append(("tmp file + os.replace", call))
        elif name.endswith("_cache_commit_hash_for_specific_revision"):
            found.append(("helper", call))
    return found


def _ref_form(mod: Module, fn: ast.FunctionDef) -> tuple[str, str] | None:
    """(form, evidence) of the ref write in ``fn``; None when it writes no ref."""
    writes = _ref_writes(mod, fn)
    if not writes:
        return None
    in_place = [call for kind, call in writes if kind == "in place"]
    if in_place:
        call = in_place[0]
        conditional = any(
            isinstance(node, ast.If)
            and re.search(r"read_text|\.read\(|exists\(|isfile\(", _unparse(node.test))
            for node in mod.ancestors(call)
        )
        when = "when missing or changed" if conditional else "every call"
        return f"in place, {when}", mod.where(call)
    kind, call = writes[0]
    return kind, mod.where(call)


def rule_ref_rewrite(sources: Mapping[str, str]) -> Cell:
    mods = modules_of(sources)
    fd = mods.get(FILE_DOWNLOAD)
    if fd is None:
        return _no(FILE_DOWNLOAD, "file_download module")
    helper = fd.function("_cache_commit_hash_for_specific_revision")
    helper_form = _ref_form(fd, helper) if helper is not None else None
    parts: list[tuple[str, str, str]] = []  # (writer, form, evidence)
    if helper is not None and helper_form is not None:
        parts.append(("hf_hub_download", *helper_form))
    else:
        inline = fd.function("hf_hub_download")
        inline_form = _ref_form(fd, inline) if inline is not None else None
        if inline_form is not None:
            parts.append(("hf_hub_download", *inline_form))
    snap = mods.get(SNAPSHOT_DOWNLOAD)
    snap_fn = snap.function("snapshot_download") if snap is not None else None
    if snap is not None and snap_fn is not None:
        snap_form = _ref_form(snap, snap_fn)
        if snap_form is not None and snap_form[0] == "helper" and helper_form is not None:
            snap_form = (f"via the helper: {helper_form[0]}", snap_form[1])
        if snap_form is not None:
            parts.append(("snapshot_download", *snap_form))
    if not parts:
        return _no(fd.path, "ref writer")
    verdict = OPEN if any("in place" in form for _, form, _ in parts) else CLOSED
    form = "; ".join(f"{writer}: {form}" for writer, form, _ in parts)
    return Cell(verdict, form, tuple(evidence for _, _, evidence in parts))


_BLOB_NAMES = {"blob_path", "destination_path", "Path(blob_path)"}
_MOVES = ("_chmod_and_replace", "_chmod_and_move", "os.replace", "os.rename", "shutil.move")


def rule_blob_rewrite(sources: Mapping[str, str]) -> Cell:
    found = _download_module(sources)
    if isinstance(found, Cell):
        return found
    fd, caller = found
    fns = [caller]
    helper = fd.function("_download_to_tmp_and_move")
    if helper is not None:
        fns.append(helper)
    in_place: list[ast.Call] = []
    moves: list[ast.Call] = []
    for fn in fns:
        for call in _calls(fn):
            name = _name(call)
            if name == "open" and _writes(_mode(call, 1)):
                if _unparse(_arg(call, 0, "file")) in _BLOB_NAMES:
                    in_place.append(call)
            elif name.endswith(".open") and isinstance(call.func, ast.Attribute):
                if _writes(_mode(call, 0)) and _unparse(call.func.value) in _BLOB_NAMES:
                    in_place.append(call)
            elif name in ("shutil.copyfile", "shutil.copy", "shutil.copy2"):
                if _unparse(_arg(call, 1, "dst")) in _BLOB_NAMES:
                    in_place.append(call)
            elif name in _MOVES and _unparse(_arg(call, 1, "dst")) in _BLOB_NAMES:
                moves.append(call)
    if in_place:
        return Cell(OPEN, "writes the blob in place", tuple(fd.where(c) for c in in_place))
    if not moves:
        return _no(fd.path, "blob writer")
    move = moves[0]
    source = _unparse(_arg(move, 0, "src"))
    kind = ".incomplete file" if "incomplete" in source else "temporary file"
    return Cell(CLOSED, f"{kind}, then {_name(move)}", (fd.where(move),))


def rule_dangling_pointer(sources: Mapping[str, str]) -> Cell:
    mods = modules_of(sources)
    cm = mods.get(CACHE_MANAGER)
    execute = cm.function("execute") if cm is not None else None
    if cm is None or execute is None:
        return _no(CACHE_MANAGER, "cache deletion")
    loops: dict[str, ast.For] = {}
    for node in ast.walk(execute):
        if isinstance(node, ast.For):
            what = _unparse(node.iter)
            if what.startswith("self.") and what[5:] not in loops:
                loops[what[5:]] = node
    order = sorted(loops, key=lambda what: loops[what].lineno)
    if "blobs" not in loops or "snapshots" not in loops:
        return _no(cm.path, "blob deletion")
    verdict = OPEN if loops["blobs"].lineno < loops["snapshots"].lineno else CLOSED
    evidence = tuple(cm.where(loops[what]) for what in order)
    return Cell(verdict, "deletes " + ", ".join(order) + ", in that order", evidence)


def rule_lock_held(sources: Mapping[str, str]) -> Cell:
    found = _download_module(sources)
    if isinstance(found, Cell):
        return found
    fd, caller = found
    assign = next(
        (
            node
            for node in ast.walk(caller)
            if isinstance(node, ast.Assign)
            and any(_unparse(target) == "lock_path" for target in node.targets)
        ),
        None,
    )
    withs = sorted(
        (
            (node, item.context_expr)
            for node in ast.walk(caller)
            if isinstance(node, ast.With)
            for item in node.items
            if isinstance(item.context_expr, ast.Call)
            and _name(item.context_expr).endswith("Lock")
            and _unparse(_arg(item.context_expr, 0, "lock_file")) == "lock_path"
        ),
        key=lambda pair: pair[0].lineno,
    )
    if assign is None or not withs:
        return _no(fd.path, "download lock")
    where = _unparse(assign.value)
    if "locks_dir" in where or ".locks" in where:
        verdict, path = OPEN, ".locks/<repo folder>/<etag>.lock"
    else:
        verdict, path = CLOSED, "blobs/<etag>.lock" if "blob_path" in where else where
    lock_class = _name(withs[0][1])
    return Cell(verdict, f"{lock_class} on {path}", (fd.where(assign), fd.where(withs[0][0])))


RULE_FUNCTIONS: dict[str, Callable[[Mapping[str, str]], Cell]] = {
    "pointer_swap": rule_pointer_swap,
    "ref_rewrite": rule_ref_rewrite,
    "blob_rewrite": rule_blob_rewrite,
    "dangling_pointer": rule_dangling_pointer,
    "lock_held": rule_lock_held,
}


def classify(sources: Mapping[str, str]) -> dict[str, Cell]:
    return {race: rule(sources) for race, rule in RULE_FUNCTIONS.items()}


# -- versions, wheels and the bisection ------------------------------------------------------


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def list_versions(since: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "huggingface_hub"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    match = re.search(r"Available versions:\s*(.+)", out)
    if match is None:
        raise SystemExit(f"could not read the versions from pip index:\n{out}")
    found = [v.strip() for v in match.group(1).split(",")]
    final = [v for v in found if re.fullmatch(r"\d+(\.\d+)*", v)]
    return sorted((v for v in final if version_key(v) >= version_key(since)), key=version_key)


def fetch_wheel(version: str, cache: Path) -> Path | None:
    cache.mkdir(parents=True, exist_ok=True)
    name = f"huggingface_hub-{version}-py3-none-any.whl"
    if not (cache / name).is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            + ["--only-binary=:all:", "-d", str(cache), f"huggingface_hub=={version}"],
            capture_output=True,
            check=False,
        )
    return cache / name if (cache / name).is_file() else None


@dataclass
class Scan:
    releases: list[str]  # every release in the range, ascending
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)  # version -> race -> cell
    skipped: list[str] = field(default_factory=list)  # releases without a usable wheel


def bisect_scan(
    releases: Sequence[str],
    step: int,
    load: Callable[[str], Mapping[str, str] | None],
    also: Sequence[str] = (),
) -> Scan:
    """Classify every ``step``-th release, the last and those in ``also``, then bisect between
    neighbours whose cells differ (verdict or form, any race) until they are adjacent."""
    scan = Scan(releases=list(releases))

    def visit(index: int) -> None:
        version = scan.releases[index]
        sources = load(version)
        if sources is None:
            scan.skipped.append(version)
            del scan.releases[index]
            return
        scan.cells[version] = classify(sources)

    picks = set(range(0, len(releases), max(step, 1))) | {len(releases) - 1}
    picks |= {i for i, version in enumerate(releases) if version in also}
    for index in sorted(picks, reverse=True):
        visit(index)  # from the end, so deletions do not shift the indices still to visit
    while True:
        known = [i for i, v in enumerate(scan.releases) if v in scan.cells]
        gaps = [
            (a, b)
            for a, b in itertools.pairwise(known)
            if b - a > 1
            and any(
                scan.cells[scan.releases[a]][race].signature
                != scan.cells[scan.releases[b]][race].signature
                for race in RACE_NAMES
            )
        ]
        if not gaps:
            return scan
        for a, b in reversed(gaps):
            visit((a + b) // 2)


def changes(scan: Scan, race: str) -> list[dict[str, Any]]:
    """Segments of classified releases with the same cell; ``first`` is exact when the
    previous segment's ``last`` is the release just before it."""
    out: list[dict[str, Any]] = []
    for version in (v for v in scan.releases if v in scan.cells):
        cell = scan.cells[version][race]
        if out and out[-1]["verdict"] == cell.verdict and out[-1]["form"] == cell.form:
            out[-1]["last"] = version
            continue
        out.append(
            {
                "first": version,
                "last": version,
                "verdict": cell.verdict,
                "form": cell.form,
                "evidence": list(cell.evidence),
            }
        )
    return out


def to_json(
    scan: Scan, empirical: list[dict[str, Any]], real_writer: list[dict[str, Any]]
) -> dict[str, Any]:
    classified = [v for v in scan.releases if v in scan.cells]
    return {
        "generated_by": "tools/hub_versions.py",
        "package": "huggingface_hub",
        "releases": scan.releases,
        "skipped": scan.skipped,
        "classified": classified,
        "races": {
            race: {
                "rule": RULES[race],
                "segments": changes(scan, race),
                "cells": {v: scan.cells[v][race].to_json() for v in classified},
            }
            for race in RACE_NAMES
        },
        "empirical": empirical,
        "real_writer": real_writer,
    }


def verdict_runs(data: Mapping[str, Any], race: str) -> list[tuple[str, str, str]]:
    """(verdict, first, last) of each run of segments with the same verdict."""
    runs: list[tuple[str, str, str]] = []
    for segment in data["races"][race]["segments"]:
        if runs and runs[-1][0] == segment["verdict"]:
            runs[-1] = (runs[-1][0], runs[-1][1], segment["last"])
        else:
            runs.append((segment["verdict"], segment["first"], segment["last"]))
    return runs


def summary(data: Mapping[str, Any], race: str) -> str:
    """The exact range in words, as the docstrings and the README quote it."""
    runs = verdict_runs(data, race)
    if len(runs) == 1:
        verdict, first, last = runs[0]
        return f"{verdict} in every release from {first} to {last}"
    words = []
    for index, (verdict, first, last) in enumerate(runs):
        if index == 0:
            words.append(f"{verdict} up to {last}")
        elif index == len(runs) - 1:
            words.append(f"{verdict} from {first}")
        else:
            words.append(f"{verdict} from {first} to {last}")
    return "; ".join(words)


# -- rendering -------------------------------------------------------------------------------


def _cell_text(segment: Mapping[str, Any]) -> str:
    return "<br>".join(f"`{line}`" for line in segment["evidence"]).replace("|", "\\|")


def _in_segment(data: Mapping[str, Any], version: str, segment: Mapping[str, Any]) -> bool:
    releases = list(data["releases"])
    if version not in releases:
        return False
    index = releases.index(version)
    return releases.index(segment["first"]) <= index <= releases.index(segment["last"])


def real_writer_text(data: Mapping[str, Any], race: str, segment: Mapping[str, Any]) -> str:
    """What exploring the real writers of the segment's releases found for the race."""
    if race not in REAL_WRITER_RACES:
        return "not explored"
    found = [
        f"{row['version']} {row['scenario']}: {row['failed'][race]} of {row['pairs']} pairs fail"
        for row in data.get("real_writer", [])
        if _in_segment(data, row["version"], segment)
    ]
    return "<br>".join(found) or "not explored"


def render_table(data: Mapping[str, Any]) -> str:
    rows = [
        "| race | releases | verdict | form | evidence (first release of the row)"
        " | real writer explored |"
    ]
    rows.append("|---|---|---|---|---|---|")
    for race in RACE_NAMES:
        for segment in data["races"][race]["segments"]:
            span = (
                segment["first"]
                if segment["first"] == segment["last"]
                else f"{segment['first']} to {segment['last']}"
            )
            rows.append(
                f"| `{race}` | {span} | **{segment['verdict']}** | {segment['form']} |"
                f" {_cell_text(segment)} | {real_writer_text(data, race, segment)} |"
            )
    return "\n".join(rows)


def render_real_writer(data: Mapping[str, Any]) -> str:
    rows = [
        "| huggingface_hub | the writer | steps | reader points | pairs | failing pairs |"
        " seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in data.get("real_writer", []):
        failing = ", ".join(f"`{race}` {n}" for race, n in row["failed"].items() if n)
        other = len(row["other_failures"])
        failing = ", ".join(part for part in (failing, f"other {other}" if other else "") if part)
        rows.append(
            f"| {row['version']} | {row['writer']} | {row['steps']} | {row['points']} |"
            f" {row['pairs']} | {failing or 'none'} | {row['seconds']:.0f} |"
        )
    return "\n".join(rows)


def render_empirical(data: Mapping[str, Any]) -> str:
    rows = [
        "| race | huggingface_hub | writer | verdict | reads | failed | failed % | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in data["empirical"]:
        share = 100.0 * row["failures"] / row["reads"] if row["reads"] else 0.0
        rows.append(
            f"| `{row['race']}` | {row['version']} | {row['writer']} | {row['verdict']} |"
            f" {row['reads']} | {row['failures']} | {share:.2f} | {row['seconds']:.1f} |"
        )
    return "\n".join(rows)


def render_markdown(data: Mapping[str, Any]) -> str:
    releases = data["releases"]
    parts = [
        "# Which huggingface_hub releases each race models",
        "",
        "<!-- Generated by `python tools/hub_versions.py --write-docs` from"
        " benchmarks/hub_versions.json. Do not edit by hand. -->",
        "",
        f"Read from the released wheels of huggingface_hub {releases[0]} to {releases[-1]}"
        f" ({len(releases)} releases; {len(data['classified'])} wheels classified, every change"
        " bisected to adjacent releases, in version order). `open`: that release's own code"
        " produces the race's window; `closed`: it does not (the race then models other"
        " writers, or other situations).",
        "",
        "## In short",
        "",
        "| race | huggingface_hub |",
        "|---|---|",
    ]
    for race in RACE_NAMES:
        parts.append(f"| `{race}` | {summary(data, race)} |")
    parts += ["", "## The table", "", render_table(data), "", "## Notes", ""]
    for race in RACE_NAMES:
        parts.append(f"- `{race}`: {NOTES[race]}")
    parts += ["", "## The rules", ""]
    for race in RACE_NAMES:
        parts.append(f"- `{race}`: {data['races'][race]['rule']}")
    parts += [
        "",
        "## Measured",
        "",
        "The real writer of that release in a loop against a fake cache, 3 reader processes"
        " reading at the same time, on 2 cores (`python tools/hub_versions.py --empirical`)."
        " What counts as a failed read: "
        + "; ".join(f"`{k}`: {v}" for k, v in FAILS.items())
        + ".",
        "",
        render_empirical(data),
        "",
        "## Explored with the real writers",
        "",
        "Each release's own download code, run against the loopback hub (`hub_remote`) and"
        " paused after each of its file operations, with a reader (a server deployed on the"
        " warm commit: it resolves `refs/main`, then loads that commit's `config.json`) held at"
        " each of its accesses until then: every (step, point) pair is one start-up"
        " (`server_fleet.explore_writer`; `python tools/hub_versions.py --real-writer`). A"
        " failing pair names the race by what the reader found: `ref_rewrite` a ref that names"
        " no commit, `pointer_swap` the deployed commit's pointer gone, `dangling_pointer` its"
        " blob gone, `blob_rewrite` other bytes. The writers: "
        + "; ".join(f"`{name}`: {text}" for name, text in SCENARIOS.items())
        + ".",
        "",
        render_real_writer(data),
        "",
    ]
    return "\n".join(parts)


def print_table(data: Mapping[str, Any]) -> None:
    for race in RACE_NAMES:
        print(f"{race}: {summary(data, race)}")
        for segment in data["races"][race]["segments"]:
            print(
                f"  {segment['first']:>8} to {segment['last']:<8} {segment['verdict']:<6}"
                f" {segment['form']}"
            )
            for line in segment["evidence"]:
                print(f"{'':22}{line}")
    if data["empirical"]:
        print()
        for row in data["empirical"]:
            print(
                f"{row['race']:<17} {row['version']:<7} {row['verdict']:<6} reads={row['reads']:<8}"
                f" failed={row['failures']:<7} {row['seconds']:.1f}s  {row['writer']}"
            )


# -- empirical checks ------------------------------------------------------------------------

FAILS = {
    "pointer_swap": "`try_to_load_from_cache` gives no path, or opening it fails",
    "ref_rewrite": "`try_to_load_from_cache` gives no path, or opening it fails",
    "blob_rewrite": "the bytes read through the pointer differ from the blob's content",
    "dangling_pointer": "the pointer is there but its blob is not",
    "lock_held": "a shared `flock` of the race's lock file could not be taken at once (held by the writer)",
}

# (race, version, writer): at least one open and one closed cell per race where both exist.
EMPIRICAL_CELLS: tuple[tuple[str, str, str], ...] = (
    ("pointer_swap", "0.14.0", "_create_symlink as at the evidence line (unguarded)"),
    ("pointer_swap", "2.4.0", "_create_symlink under WeakFileLock, only when missing"),
    ("ref_rewrite", "1.15.0", "_cache_commit_hash_for_specific_revision, 2 commits in turn"),
    ("ref_rewrite", "2.4.0", "_cache_commit_hash_for_specific_revision, 2 commits in turn"),
    ("ref_rewrite", "1.30.0", "snapshot_download (repo_info stubbed), 2 commits in turn"),
    ("ref_rewrite", "1.31.0", "snapshot_download (repo_info stubbed), 2 commits in turn"),
    ("blob_rewrite", "0.14.0", "new file next to the blob + _chmod_and_replace"),
    ("blob_rewrite", "2.4.0", "new file next to the blob + _chmod_and_move"),
    ("dangling_pointer", "0.14.0", "scan_cache_dir().delete_revisions().execute()"),
    ("dangling_pointer", "2.4.0", "scan_cache_dir().delete_revisions().execute()"),
    ("lock_held", "0.14.0", "FileLock(blob_path + '.lock') held"),
    ("lock_held", "2.4.0", "WeakFileLock(.locks/<repo>/<etag>.lock) held"),
)

DRIVER = r"""
import json, os, sys, time
from pathlib import Path

role, race, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
hub, repo_id = params["hub"], params["repo_id"]
storage = Path(hub) / ("models--" + repo_id.replace("/", "--"))
pointer, blob, content = Path(params["pointer"]), Path(params["blob"]), params["content"].encode()
if race == "ref_rewrite" and params["writer"] == "snapshot_download" and role == "writer":
    os.environ["HF_HUB_OFFLINE"] = "0"
import huggingface_hub
from huggingface_hub import file_download as fd
from huggingface_hub import try_to_load_from_cache

def lock_class():
    try:
        from huggingface_hub.utils import WeakFileLock
        return WeakFileLock
    except ImportError:
        from filelock import FileLock
        return FileLock

while time.time() < params["t0"]:
    time.sleep(0.001)
reads = failures = extra = 0
if role == "reader":
    import fcntl
    while time.time() < params["t1"]:
        reads += 1
        if race == "lock_held":
            # a shared flock: blocked only by an exclusive holder (filelock), not by other readers
            fd_ = os.open(params["race_lock"], os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd_, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd_, fcntl.LOCK_UN)
            except BlockingIOError:
                failures += 1
            finally:
                os.close(fd_)
            continue
        if race == "dangling_pointer":
            p = params["old_pointer"]
            try:
                with open(p, "rb") as f:
                    f.read()
            except FileNotFoundError:
                # dangling: the same pointer (inode, ctime) is there before and after a moment
                # when its blob is not; an absent pointer is a deleted revision, not this race
                try:
                    before = os.lstat(p)
                    blob_gone = not os.path.exists(os.path.join(os.path.dirname(p), os.readlink(p)))
                    after = os.lstat(p)
                except OSError:
                    extra += 1
                    continue
                same = (before.st_ino, before.st_ctime_ns) == (after.st_ino, after.st_ctime_ns)
                failures += blob_gone and same
                extra += not (blob_gone and same)
            continue
        if race == "blob_rewrite":
            try:
                with open(pointer, "rb") as f:
                    failures += f.read() != content
            except OSError:
                failures += 1
            continue
        path = try_to_load_from_cache(repo_id, "config.json", cache_dir=hub)
        try:
            if not isinstance(path, str):
                raise FileNotFoundError(path)
            with open(path, "rb") as f:
                f.read()
        except OSError:
            failures += 1
else:
    Lock = lock_class()
    link = getattr(fd, "_create_symlink", None) or fd._create_relative_symlink
    i = 0
    if race == "ref_rewrite" and params["writer"] == "snapshot_download":
        from huggingface_hub import hf_api, snapshot_download
        class Info:
            siblings = []
            sha = params["commits"][0]
        def repo_info(self, *a, **k):
            return Info
        hf_api.HfApi.repo_info = repo_info
        hf_api.HfApi.list_repo_tree = lambda self, *a, **k: iter([])
    while time.time() < params["t1"]:
        i += 1
        if race == "pointer_swap":
            if params["guarded"]:
                with Lock(params["lock"]):
                    if not os.path.exists(pointer):
                        link(str(blob), str(pointer))
            else:
                link(str(blob), str(pointer))
        elif race == "ref_rewrite":
            commit = params["commits"][i % 2]
            if params["writer"] == "snapshot_download":
                Info.sha = commit
                snapshot_download(repo_id, cache_dir=hub, revision="main")
            else:
                fd._cache_commit_hash_for_specific_revision(str(storage), "main", commit)
        elif race == "blob_rewrite":
            tmp = blob.with_name(blob.name + ".%d.incomplete" % i)
            tmp.write_bytes(content)
            if hasattr(fd, "_chmod_and_move"):
                fd._chmod_and_move(tmp, blob)
            else:
                fd._chmod_and_replace(str(tmp), str(blob))
        elif race == "dangling_pointer":
            from huggingface_hub import scan_cache_dir
            scan_cache_dir(hub).delete_revisions(params["old_commit"]).execute()
            old_blob, old_pointer = Path(params["old_blob"]), Path(params["old_pointer"])
            tmp = old_blob.with_name(old_blob.name + ".incomplete")
            tmp.write_bytes(params["old_content"].encode())
            os.replace(tmp, old_blob)
            old_pointer.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.relpath(old_blob, old_pointer.parent), old_pointer)
            (storage / "refs" / "v1").write_text(params["old_commit"])
        elif race == "lock_held":
            with Lock(params["lock"]):
                time.sleep(0.005)
            time.sleep(0.005)
print(json.dumps({"role": role, "reads": reads, "failures": failures, "extra": extra,
                  "writes": i if role == "writer" else 0, "version": huggingface_hub.__version__}))
"""


def venv_python(version: str, cache: Path) -> Path:
    home = cache / "venvs" / version
    python = home / "bin" / "python"
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", f"huggingface_hub=={version}"],
            check=True,
        )
    return python


def run_cell(
    race: str, version: str, writer: str, cell: Mapping[str, Any], cache: Path, seconds: float
) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from pytest_startup_guard import FakeHubCache

    python = venv_python(version, cache)
    with tempfile.TemporaryDirectory(prefix="hubv-") as tmp:
        fake = FakeHubCache(Path(tmp) / "home")
        old = fake.add_model("acme/tiny", {"config.json": {"model_type": "bert", "v": 1}}, "v1")
        repo = fake.add_model("acme/tiny", {"config.json": {"model_type": "bert", "v": 2}})
        driver = Path(tmp) / "driver.py"
        driver.write_text(DRIVER)
        lock = repo.lock("config.json")
        # lock_held: the file this release locks (open: the race's own; closed: blobs/<etag>.lock)
        version_lock = lock if cell["verdict"] == OPEN else Path(f"{repo.blob('config.json')}.lock")
        t0 = time.time() + 3.0
        params = {
            "hub": str(fake.hub_dir),
            "repo_id": "acme/tiny",
            "pointer": str(repo.pointer("config.json")),
            "blob": str(repo.blob("config.json")),
            "content": repo.blob("config.json").read_text(),
            "commits": [repo.commit, old.commit],
            "writer": "snapshot_download" if writer.startswith("snapshot_download") else writer,
            "guarded": race == "pointer_swap" and cell["verdict"] == CLOSED,
            "lock": str(version_lock if race == "lock_held" else lock),
            "race_lock": str(lock),
            "old_commit": old.commit,
            "old_blob": str(old.blob("config.json")),
            "old_pointer": str(old.pointer("config.json")),
            "old_content": old.blob("config.json").read_text(),
            "t0": t0,
            "t1": t0 + seconds,
        }
        lock.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **fake.env}
        env.pop("PYTHONPATH", None)
        procs = [
            subprocess.Popen(
                [str(python), str(driver), role, race, json.dumps(params)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for role in ("writer", "reader", "reader", "reader")
        ]
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=seconds + 60)
            if proc.returncode != 0:
                raise RuntimeError(f"{race} {version}: driver failed:\n{err[-2000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    readers = [r for r in results if r["role"] == "reader"]
    return {
        "race": race,
        "version": version,
        "writer": writer,
        "verdict": cell["verdict"],
        "reads": sum(r["reads"] for r in readers),
        "failures": sum(r["failures"] for r in readers),
        "writes": results[0]["writes"],
        "seconds": seconds,
    }


def empirical(data: Mapping[str, Any], cache: Path, seconds: float) -> list[dict[str, Any]]:
    rows = []
    for race, version, writer in EMPIRICAL_CELLS:
        cell = data["races"][race]["cells"].get(version)
        if cell is None:
            raise SystemExit(f"{race}@{version} is not classified: rerun the scan with it")
        row = run_cell(race, version, writer, cell, cache, seconds)
        print(
            f"{race:<17}{version:<8}{cell['verdict']:<7}{row['reads']:>7} reads"
            f" {row['failures']:>6} failed  ({row['writes']} writes)",
            flush=True,
        )
        rows.append(row)
    return rows


# -- the real writers, explored ---------------------------------------------------------------

# (version, scenario): each release's own download code run against the loopback hub
# (``hub_remote``) and paused after each of its file operations, a reader held at each of its
# accesses until then (``server_fleet.explore_writer``). The versions: the oldest, the
# EMPIRICAL_CELLS releases (both sides of every fix they measure).
REAL_WRITER_VERSIONS: tuple[str, ...] = ("0.8.1", "0.14.0", "1.15.0", "1.30.0", "1.31.0", "2.4.0")
SCENARIOS: dict[str, str] = {
    "refresh": "snapshot_download of a new commit onto a warm cache",
    "force": "hf_hub_download(force_download=True) of the cached commit",
}
# The races a reader's failure can name (the reader's first line says which).
REAL_WRITER_RACES = ("pointer_swap", "ref_rewrite", "blob_rewrite", "dangling_pointer")

# A server deployed on the warm commit: it resolves refs/main once (a ref that names no commit
# is fatal: ref_rewrite), then loads the commit it was deployed with (a pointer gone:
# pointer_swap; a pointer whose blob is gone: dangling_pointer; bytes that are not the file's:
# blob_rewrite). Reads the layout itself, as every release writes it.
REAL_WRITER_READER = r"""
import json, os, re, sys, time
repo, pinned, expected = sys.argv[1], sys.argv[2], sys.argv[3]
folder = os.path.join(os.environ["HF_HUB_CACHE"], "models--" + repo.replace("/", "--"))
def fail(race, why):
    print(f"race={race}: {why}", flush=True)
    sys.exit(1)
try:
    with open(os.path.join(folder, "refs", "main")) as ref:
        commit = ref.read()
except OSError as error:
    fail("ref_rewrite", f"refs/main: {error}")
if not re.fullmatch(r"[0-9a-f]{40}", commit):
    fail("ref_rewrite", f"refs/main holds {commit!r}")
pointer = os.path.join(folder, "snapshots", pinned, "config.json")
try:
    with open(pointer, "rb") as handle:
        data = handle.read()
except FileNotFoundError:
    if os.path.islink(pointer):
        fail("dangling_pointer", f"{pointer} points to a blob that is gone")
    fail("pointer_swap", f"{pointer} is gone")
if data != expected.encode():
    fail("blob_rewrite", f"{pointer} holds {data[:40]!r}, not the file")
print("ready", flush=True)
time.sleep(300)
"""

REAL_WRITER_TEST = r"""
import json, os, subprocess, sys
from pathlib import Path
from pytest_startup_guard import ready

RELEASE, SCENARIO, OUT, READER = sys_args = json.loads(os.environ["HUBV_REAL_WRITER"])
REPO = "acme/tiny"

def test_real_writer(hub_remote, server_fleet):
    first = hub_remote.add_model(REPO, {"config.json": {"model_type": "gpt2", "v": 1}})
    warm = hub_remote.writer(REPO, release=RELEASE)
    done = subprocess.run(warm.argv, env={**os.environ, **warm.env}, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    if SCENARIO == "refresh":
        hub_remote.push(REPO, {"config.json": {"model_type": "gpt2", "v": 2}})
        writer = hub_remote.writer(REPO, release=RELEASE)
    else:
        writer = hub_remote.writer(REPO, call="hf_hub_download", filename="config.json",
                                   force_download=True, release=RELEASE)
    expected = first.files["config.json"].decode()
    readers = [sys.executable, READER, REPO, first.commit, expected]
    exploration = server_fleet.explore_writer(
        writer, readers, ready=ready.log("ready"), env={"PYTHONPATH": RELEASE})
    rows = []
    for pair in exploration.pairs:
        race = None
        if pair.reason and "race=" in pair.reason:
            race = pair.reason.split("race=", 1)[1].split(":", 1)[0]
        rows.append({"pair": pair.key, "outcome": pair.outcome, "race": race,
                     "reason": pair.reason, "writer_code": pair.writer_code})
    Path(OUT).write_text(json.dumps({
        "steps": len(exploration.steps), "points": len(exploration.points),
        "pairs": rows, "states_per_second": exploration.states_per_second}))
"""


def release_folder(version: str, cache: Path) -> Path:
    """A folder holding that release and its dependencies: ``make test``'s, or one of ours."""
    made = ROOT / ".venv" / "hub-releases" / version
    if (made / "huggingface_hub" / "__init__.py").is_file():
        return made
    folder = cache / "targets" / version
    if not (folder / "huggingface_hub" / "__init__.py").is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-warn-conflicts",
                "--no-compile",
                "--target",
                str(folder),
                f"huggingface_hub=={version}",
            ],
            check=True,
        )
    return folder


def run_real_writer(version: str, scenario: str, cache: Path) -> dict[str, Any]:
    """Explore one release's writer in one scenario: a pytest run of the plugin (its
    ``hub_remote`` and ``explore_writer``); the failing pairs, counted per race the reader named."""
    folder = release_folder(version, cache)
    with tempfile.TemporaryDirectory(prefix="hubv-writer-") as tmp:
        test, reader, out = (
            Path(tmp) / "test_cell.py",
            Path(tmp) / "reader.py",
            Path(tmp) / "out.json",
        )
        test.write_text(REAL_WRITER_TEST)
        reader.write_text(REAL_WRITER_READER)
        env = {
            **os.environ,
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "HUBV_REAL_WRITER": json.dumps([str(folder), scenario, str(out), str(reader)]),
        }
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "startup_guard",
                "-q",
                "-x",
                str(test),
                "-p",
                "no:cacheprovider",
            ],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - started
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(
                f"{version} {scenario}: the exploration failed:\n{done.stdout[-4000:]}"
            )
        found = json.loads(out.read_text())
    failed = [pair for pair in found["pairs"] if pair["outcome"] == "failed"]
    return {
        "version": version,
        "scenario": scenario,
        "writer": SCENARIOS[scenario],
        "steps": found["steps"],
        "points": found["points"],
        "pairs": sum(pair["outcome"] != "not reached" for pair in found["pairs"]),
        "failed": {
            race: sum(pair["race"] == race for pair in failed) for race in REAL_WRITER_RACES
        },
        "other_failures": [pair["reason"] for pair in failed if pair["race"] is None],
        "seconds": round(seconds, 1),
    }


def real_writers(cache: Path) -> list[dict[str, Any]]:
    rows = []
    for version in REAL_WRITER_VERSIONS:
        for scenario in SCENARIOS:
            row = run_real_writer(version, scenario, cache)
            failing = ", ".join(f"{race} {n}" for race, n in row["failed"].items() if n) or "none"
            print(
                f"{version:<8}{scenario:<9}{row['steps']:>3} steps {row['pairs']:>3} pairs"
                f"  failing: {failing}  ({row['seconds']:.0f} s)",
                flush=True,
            )
            rows.append(row)
    return rows


# -- command line ----------------------------------------------------------------------------


def load_data(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def write_data(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="wheels and venvs")
    parser.add_argument("--since", default=SINCE, help="first release to read")
    parser.add_argument("--step", type=int, default=6, help="classify every Nth release first")
    parser.add_argument("--data", type=Path, default=DATA, help="the JSON the table goes to")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the Markdown page")
    parser.add_argument("--empirical", action="store_true", help="measure EMPIRICAL_CELLS")
    parser.add_argument("--seconds", type=float, default=3.0, help="per empirical cell (<= 5)")
    parser.add_argument("--write-docs", action="store_true", help="render the Markdown page")
    parser.add_argument(
        "--real-writer", action="store_true", help="explore REAL_WRITER_VERSIONS' own writers"
    )
    args = parser.parse_args(argv)
    if not (args.empirical or args.write_docs or args.real_writer):
        releases = list_versions(args.since)
        wheels = args.cache / "wheels"

        def load(version: str) -> Mapping[str, str] | None:
            wheel = fetch_wheel(version, wheels)
            return None if wheel is None else read_wheel(wheel)

        scan = bisect_scan(releases, args.step, load, [v for _, v, _ in EMPIRICAL_CELLS])
        previous = load_data(args.data) if args.data.is_file() else {}
        write_data(
            args.data,
            to_json(scan, previous.get("empirical", []), previous.get("real_writer", [])),
        )
    data = load_data(args.data)
    if args.empirical:
        data["empirical"] = empirical(data, args.cache, min(args.seconds, 5.0))
        write_data(args.data, data)
    if args.real_writer:
        data["real_writer"] = real_writers(args.cache)
        write_data(args.data, data)
    if args.write_docs:
        args.docs.parent.mkdir(parents=True, exist_ok=True)
        args.docs.write_text(render_markdown(data))
    print_table(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
