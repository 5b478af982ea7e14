"""The huggingface_hub version table: its shape, its quotes, and the rules that make it.

No network and no download: the table is read from benchmarks/hub_versions.json, written by
``python tools/hub_versions.py`` (run by hand or in a scheduled job).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_startup_guard import RACES

ROOT = Path(__file__).resolve().parent.parent


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "hub_versions", ROOT / "tools" / "hub_versions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("hub_versions", module)
    spec.loader.exec_module(module)
    return module


hv = _load_tool()
DATA: dict[str, Any] = json.loads((ROOT / "benchmarks" / "hub_versions.json").read_text())
BUILTIN = ("pointer_swap", "ref_rewrite", "blob_rewrite", "dangling_pointer", "lock_held")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _flat(text: str | None) -> str:
    return " ".join((text or "").split())


# -- the committed table ---------------------------------------------------------------------


def test_every_builtin_race_has_a_row() -> None:
    assert set(BUILTIN) <= set(RACES)
    assert tuple(DATA["races"]) == hv.RACE_NAMES == BUILTIN


def test_versions_ascend_and_cells_are_well_formed() -> None:
    releases = DATA["releases"]
    assert releases == sorted(releases, key=_key)
    assert len(set(releases)) == len(releases)
    assert DATA["classified"] == [v for v in releases if v in DATA["classified"]]
    for race, row in DATA["races"].items():
        assert set(row["cells"]) == set(DATA["classified"]), race
        for version, cell in row["cells"].items():
            assert cell["verdict"] in ("open", "closed"), (race, version)
            assert cell["form"], (race, version)
            assert cell["evidence"], (race, version)
            for line in cell["evidence"]:
                assert re.match(r"huggingface_hub/[\w/]+\.py(:\d+)?: \S", line), line


def test_segments_match_the_cells_and_every_change_is_exact() -> None:
    releases = DATA["releases"]
    for race, row in DATA["races"].items():
        segments = row["segments"]
        assert segments[0]["first"] == DATA["classified"][0]
        assert segments[-1]["last"] == DATA["classified"][-1]
        for before, after in itertools.pairwise(segments):
            # bisected down to adjacent releases: the first version of a change is exact
            assert releases.index(after["first"]) == releases.index(before["last"]) + 1, race
            assert (before["verdict"], before["form"]) != (after["verdict"], after["form"])
        for segment in segments:
            lo, hi = releases.index(segment["first"]), releases.index(segment["last"])
            for version in releases[lo : hi + 1]:
                cell = row["cells"].get(version)
                if cell is not None:
                    assert cell["verdict"] == segment["verdict"], (race, version)
                    assert cell["form"] == segment["form"], (race, version)
            assert segment["evidence"] == row["cells"][segment["first"]]["evidence"]


def test_the_known_first_versions() -> None:
    """The changes the issue named, as read in the wheels (guards against a bad regeneration)."""
    assert hv.summary(DATA, "ref_rewrite") == "open up to 1.30.0; closed from 1.31.0"
    forms = {s["first"]: s["form"] for s in DATA["races"]["ref_rewrite"]["segments"]}
    assert "hf_hub_download: in place, when missing or changed" in forms["0.12.0"]
    assert forms["1.18.0"].startswith("hf_hub_download: tmp file + os.replace")
    cells = DATA["races"]["ref_rewrite"]["cells"]
    assert "write_text(commit_hash)" in cells["1.15.0"]["evidence"][0]
    assert "os.replace" in cells["2.4.0"]["evidence"][0]
    assert hv.summary(DATA, "pointer_swap") == "open up to 0.31.4; closed from 0.32.0"


def test_docstrings_and_models_name_the_same_versions() -> None:
    for race in BUILTIN:
        words = hv.summary(DATA, race)
        assert words in _flat(RACES[race].models), (race, words, RACES[race].models)
        doc = _flat(RACES[race].__doc__)
        for version in re.findall(r"\d+\.\d+\.\d+", words):
            assert version in doc, (race, version)


def test_the_docs_page_is_the_rendered_table() -> None:
    page = (ROOT / "docs" / "hub-versions.md").read_text()
    assert page == hv.render_markdown(DATA), "rerun: python tools/hub_versions.py --write-docs"
    for race in BUILTIN:
        assert f"| `{race}` | {hv.summary(DATA, race)} |" in page


@pytest.mark.parametrize("page", ["README.md", "docs/races.md"])
def test_the_readme_and_the_races_page_quote_every_range(page: str) -> None:
    lines = (ROOT / page).read_text().splitlines()
    for race in BUILTIN:
        rows = [line.lower() for line in lines if line.startswith(f"| `{race}` |")]
        assert rows, f"{page} has no table row for {race}"
        assert any(hv.summary(DATA, race) in row for row in rows), (page, race)
    assert "hub-versions.md" in "\n".join(lines)


def test_empirical_figures_agree_with_the_cells() -> None:
    rows = DATA["empirical"]
    for race in BUILTIN:
        mine = [row for row in rows if row["race"] == race]
        assert len(mine) >= 2, race
        verdicts = {row["verdict"] for row in mine}
        table = {s["verdict"] for s in DATA["races"][race]["segments"]}
        assert verdicts == table, (race, verdicts, table)  # one open and one closed where both
        for row in mine:
            assert row["verdict"] == DATA["races"][race]["cells"][row["version"]]["verdict"]
            assert 0 < row["seconds"] <= 5 and row["reads"] > 0
            if row["verdict"] == "closed":
                assert row["failures"] == 0, row
            else:
                assert row["failures"] > 0, row


def test_the_real_writers_agree_with_the_cells() -> None:
    """What exploring each release's own writer found (``--real-writer``) against the rules:
    a failing pair only where the race is open in that release, and a snapshot_download refresh
    fails on a ref that names no commit exactly where ``ref_rewrite`` is open."""
    rows = DATA["real_writer"]
    assert {row["version"] for row in rows} == set(hv.REAL_WRITER_VERSIONS)
    assert {row["scenario"] for row in rows} == set(hv.SCENARIOS)
    for row in rows:
        assert row["pairs"] > 0 and row["steps"] > 0 and not row["other_failures"], row
        cells = {race: DATA["races"][race]["cells"][row["version"]] for race in row["failed"]}
        for race, failed in row["failed"].items():
            if failed:
                assert cells[race]["verdict"] == "open", (row["version"], row["scenario"], race)
        if row["scenario"] == "refresh":
            assert (row["failed"]["ref_rewrite"] > 0) == (cells["ref_rewrite"]["verdict"] == "open")


# -- the rules, on small sources -------------------------------------------------------------

FD = "huggingface_hub/file_download.py"
SNAP = "huggingface_hub/_snapshot_download.py"
CM = "huggingface_hub/utils/_cache_manager.py"

SWAP = """
def _create_symlink(src, dst, new_blob=False):
    try:
        os.remove(dst)
    except OSError:
        pass
    os.symlink(src, dst)
"""


def _src(text: str) -> str:
    return textwrap.dedent(text)


def test_pointer_swap_old_form_is_open() -> None:
    caller = """
    def hf_hub_download(repo_id, filename):
        if os.path.exists(pointer_path):
            return pointer_path
        if os.path.exists(blob_path):
            _create_symlink(blob_path, pointer_path, new_blob=False)
            return pointer_path
        with FileLock(lock_path):
            download(blob_path)
            _create_symlink(blob_path, pointer_path, new_blob=True)
    """
    cell = hv.rule_pointer_swap({FD: _src(SWAP) + _src(caller)})
    assert cell.verdict == "open"
    assert cell.form == (
        "re-creates pointers outside the blob lock; re-creates the pointer after every download"
    )
    assert cell.evidence[0].endswith(": os.remove(dst)")


def test_pointer_swap_new_form_is_closed() -> None:
    caller = """
    def _hf_hub_download_to_cache_dir(repo_id, filename):
        if os.path.exists(pointer_path):
            return pointer_path
        if os.path.exists(blob_path):
            with WeakFileLock(lock_path):
                if not os.path.exists(pointer_path):
                    _create_symlink(blob_path, pointer_path, new_blob=False)
                return pointer_path
        with WeakFileLock(lock_path):
            download(blob_path)
            if not os.path.exists(pointer_path):
                _create_symlink(blob_path, pointer_path, new_blob=True)
    """
    cell = hv.rule_pointer_swap({FD: _src(SWAP) + _src(caller)})
    assert cell.verdict == "closed"
    assert len(cell.evidence) == 3


def test_pointer_swap_atomic_writer_is_closed() -> None:
    writer = """
    def _create_symlink(src, dst, new_blob=False):
        os.symlink(src, dst + ".tmp")
        os.replace(dst + ".tmp", dst)

    def hf_hub_download(repo_id, filename):
        _create_symlink(blob_path, pointer_path)
    """
    assert hv.rule_pointer_swap({FD: _src(writer)}).verdict == "closed"


REF_OLD = """
def _cache_commit_hash_for_specific_revision(storage_folder, revision, commit_hash):
    if revision != commit_hash:
        ref_path = os.path.join(storage_folder, "refs", revision)
        with open(ref_path, "w") as f:
            f.write(commit_hash)
"""
REF_CHECKED = """
def _cache_commit_hash_for_specific_revision(storage_folder, revision, commit_hash):
    if revision != commit_hash:
        ref_path = Path(storage_folder) / "refs" / revision
        if not ref_path.exists() or commit_hash != ref_path.read_text():
            ref_path.write_text(commit_hash)
"""
REF_ATOMIC = """
def _cache_commit_hash_for_specific_revision(storage_folder, revision, commit_hash):
    if revision != commit_hash:
        ref_path = Path(storage_folder) / "refs" / revision
        if not ref_path.exists() or commit_hash != ref_path.read_text():
            tmp_path = ref_path.with_name(ref_path.name + ".tmp")
            tmp_path.write_text(commit_hash)
            os.replace(tmp_path, ref_path)
"""
SNAP_IN_PLACE = """
def snapshot_download(repo_id, revision=None):
    if revision != commit_hash:
        ref_path = os.path.join(storage_folder, "refs", revision)
        with open(ref_path, "w") as f:
            f.write(commit_hash)
"""
SNAP_HELPER = """
def snapshot_download(repo_id, revision=None):
    if revision != commit_hash:
        _cache_commit_hash_for_specific_revision(storage_folder, revision, commit_hash)
"""


@pytest.mark.parametrize(
    ("helper", "snap", "verdict", "form"),
    [
        (REF_OLD, SNAP_IN_PLACE, "open", "hf_hub_download: in place, every call"),
        (REF_CHECKED, SNAP_IN_PLACE, "open", "hf_hub_download: in place, when missing or changed"),
        (REF_ATOMIC, SNAP_IN_PLACE, "open", "hf_hub_download: tmp file + os.replace"),
        (REF_ATOMIC, SNAP_HELPER, "closed", "hf_hub_download: tmp file + os.replace"),
    ],
)
def test_ref_rewrite_forms(helper: str, snap: str, verdict: str, form: str) -> None:
    cell = hv.rule_ref_rewrite({FD: helper, SNAP: snap})
    assert cell.verdict == verdict
    assert cell.form.startswith(form + "; snapshot_download: ")
    assert len(cell.evidence) == 2


def test_ref_rewrite_inline_predecessor_is_found() -> None:
    inline = """
    def hf_hub_download(repo_id, filename, revision=None):
        if revision != commit_hash:
            ref_path = os.path.join(storage_folder, "refs", revision)
            with open(ref_path) as f:
                old = f.read()
            with open(ref_path, "w") as f:
                f.write(commit_hash)
    """
    cell = hv.rule_ref_rewrite({FD: _src(inline)})
    assert (cell.verdict, cell.form) == ("open", "hf_hub_download: in place, every call")
    assert cell.evidence[0].endswith(': with open(ref_path, "w") as f:')


def test_blob_rewrite_forms() -> None:
    in_place = """
    def hf_hub_download(repo_id, filename):
        with open(blob_path, "wb") as f:
            http_get(url, f)
    """
    moved = """
    def _hf_hub_download_to_cache_dir(repo_id, filename):
        with WeakFileLock(lock_path):
            _download_to_tmp_and_move(incomplete_path=Path(blob_path + ".incomplete"),
                                      destination_path=Path(blob_path))

    def _download_to_tmp_and_move(incomplete_path, destination_path):
        with incomplete_path.open("ab") as f:
            http_get(url, f)
        _chmod_and_move(incomplete_path, destination_path)
    """
    assert hv.rule_blob_rewrite({FD: _src(in_place)}).verdict == "open"
    cell = hv.rule_blob_rewrite({FD: _src(moved)})
    assert (cell.verdict, cell.form) == ("closed", ".incomplete file, then _chmod_and_move")


def test_dangling_pointer_forms() -> None:
    execute = """
    class DeleteCacheStrategy:
        def execute(self):
            for path in self.{}:
                _try_delete_path(path, "a")
            for path in self.{}:
                _try_delete_path(path, "b")
    """
    blobs_first = hv.rule_dangling_pointer({CM: _src(execute.format("blobs", "snapshots"))})
    assert (blobs_first.verdict, blobs_first.form) == (
        "open",
        "deletes blobs, snapshots, in that order",
    )
    snapshots_first = hv.rule_dangling_pointer({CM: _src(execute.format("snapshots", "blobs"))})
    assert snapshots_first.verdict == "closed"
    assert hv.rule_dangling_pointer({FD: "x = 1\n"}).form == "no cache deletion"


def test_lock_held_forms() -> None:
    caller = """
    def hf_hub_download(repo_id, filename):
        lock_path = {}
        with {}(lock_path):
            download(blob_path)
    """
    old = hv.rule_lock_held({FD: _src(caller.format('blob_path + ".lock"', "FileLock"))})
    assert (old.verdict, old.form) == ("closed", "FileLock on blobs/<etag>.lock")
    new_path = 'os.path.join(locks_dir, repo_folder_name(repo_id=repo_id), f"{etag}.lock")'
    new = hv.rule_lock_held({FD: _src(caller.format(new_path, "WeakFileLock"))})
    assert (new.verdict, new.form) == ("open", "WeakFileLock on .locks/<repo folder>/<etag>.lock")


def test_bisection_finds_the_exact_first_release_with_few_wheels() -> None:
    releases = [f"0.{minor}.{patch}" for minor in range(10) for patch in range(5)]
    flip = releases.index("0.6.3")
    loaded: list[str] = []

    def load(version: str) -> dict[str, str]:
        loaded.append(version)
        mode = '"w"' if releases.index(version) < flip else '"x"'
        body = f"""
        def _cache_commit_hash_for_specific_revision(storage_folder, revision, commit_hash):
            with open(ref_path, {mode}) as f:
                f.write(commit_hash)
        """
        if releases.index(version) >= flip:
            body = REF_ATOMIC
        return {FD: _src(body)}

    scan = hv.bisect_scan(releases, 10, load)
    segments = hv.changes(scan, "ref_rewrite")
    assert [(s["first"], s["verdict"]) for s in segments] == [
        ("0.0.0", "open"),
        ("0.6.3", "closed"),
    ]
    assert len(loaded) <= 6 + 4  # the sparse pass plus log2(10) steps of bisection
