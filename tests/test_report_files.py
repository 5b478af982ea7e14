"""Files written where the user pointed (reports, HTML, artifacts, ``merge -o``): whole or not at
all, through a temporary file created exclusively in the target's own folder, never through a
name planted there, and nothing left behind."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_startup_guard.report import atomic
from pytest_startup_guard.report.artifacts import folder_name
from pytest_startup_guard.report.atomic import copy_atomically, write_atomically


def names(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()}


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file elsewhere that a planted symlink points at: it must never change."""
    path = tmp_path / "elsewhere" / "victim"
    path.parent.mkdir()
    path.write_text("precious\n")
    return path


def test_a_symlink_planted_at_the_temporary_name_is_not_followed(
    tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    # Make the random names predictable: the first is planted, the second is free.
    draws: Iterator[bytes] = iter([b"\x00" * 6, b"\x01" * 6])
    monkeypatch.setattr(atomic.os, "urandom", lambda size: next(draws))
    planted = folder / f".report.json.{'00' * 6}.tmp"
    planted.symlink_to(victim)
    old_name = folder / f".report.json.{os.getpid()}.tmp"  # the name the writer once used
    old_name.symlink_to(victim)

    write_atomically(folder / "report.json", "{}\n")

    assert victim.read_text() == "precious\n"
    assert (folder / "report.json").read_text() == "{}\n"
    assert not (folder / "report.json").is_symlink()
    assert names(folder) == {"report.json", planted.name, old_name.name}  # theirs, untouched


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path, victim: Path) -> None:
    target = tmp_path / "report.html"
    target.symlink_to(victim)
    write_atomically(target, "<html></html>\n")
    assert victim.read_text() == "precious\n"
    assert not target.is_symlink() and target.read_text() == "<html></html>\n"


def test_a_file_gets_the_mode_of_a_new_file_not_mkstemps_0600(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_atomically(tmp_path / "report.json", "{}")
    finally:
        os.umask(umask)
    assert (tmp_path / "report.json").stat().st_mode & 0o777 == 0o644


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "server.log").write_text("new output\n")
    target = tmp_path / "artifacts" / "server-0.log"
    target.parent.mkdir()
    target.write_text("old\n")

    def broken(source: object, destination: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", broken)
    with pytest.raises(OSError, match="No space left"):
        copy_atomically(tmp_path / "server.log", target)
    assert target.read_text() == "old\n"
    assert names(target.parent) == {"server-0.log"}
    monkeypatch.undo()
    copy_atomically(tmp_path / "server.log", target)
    assert target.read_text() == "new output\n"
    assert names(target.parent) == {"server-0.log"}


def test_a_folder_as_target_is_an_error_before_anything_is_written(tmp_path: Path) -> None:
    """``--startup-guard-html=/tmp`` once wrote its temporary file in ``/``."""
    target = tmp_path / "a-folder"
    target.mkdir()
    before = names(tmp_path)
    with pytest.raises(IsADirectoryError, match="is a folder; give the path of a file"):
        write_atomically(target, "<html></html>")
    with pytest.raises(FileNotFoundError):  # no folder is made for a file
        write_atomically(tmp_path / "missing" / "report.json", "{}")
    assert names(tmp_path) == before and names(target) == set()


def test_artifacts_are_not_written_through_planted_symlinks(
    guard_pytester: pytest.Pytester, victim: Path
) -> None:
    """A failed test's artifacts folder holds a symlink at ``failure.txt`` from before: the
    run replaces it, the file it pointed at stays as it was."""
    guard_pytester.makepyfile(test_fails="def test_fails(hub_race):\n    assert False\n")
    folder = guard_pytester.path / "artifacts" / folder_name("test_fails.py::test_fails", 0)
    folder.mkdir(parents=True)
    (folder / "failure.txt").symlink_to(victim)
    (folder / "test.json").symlink_to(victim)
    (guard_pytester.path / "out").mkdir()
    result = guard_pytester.runpytest_subprocess(
        "-p", "startup_guard", "--startup-guard-artifacts=artifacts",
        "--startup-guard-report=out/report.json", "--startup-guard-html=out/report.html",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    assert victim.read_text() == "precious\n"
    failure = folder / "failure.txt"
    assert not failure.is_symlink() and "test_fails.py::test_fails" in failure.read_text()
    assert not (folder / "test.json").is_symlink()
    assert not [p.name for p in guard_pytester.path.rglob("*.tmp")]  # nothing left behind
    assert names(guard_pytester.path / "out") == {"report.json", "report.html"}
