"""A test author's own race: subclass ``Race``, name the writer it models, open and close."""

from __future__ import annotations

import os

from pytest_startup_guard import Race, RaceTarget


class SnapshotResync(Race):
    """A cache sync tool (``rsync --delete-before`` from a shared volume) removes a snapshot
    folder and copies it back: for a moment the whole revision is gone."""

    name = "snapshot_resync"
    models = "rsync --delete-before of snapshots/<commit>: the folder is gone, then back"

    @Race.takes(RaceTarget)  # written for a hub repo's file: mypy checks the body against it
    def open(self, target: RaceTarget) -> None:
        snapshot = target.repo.path / "snapshots" / target.commit
        os.rename(snapshot, snapshot.with_name(snapshot.name + ".resync"))

    @Race.takes(RaceTarget)
    def close(self, target: RaceTarget) -> None:
        snapshot = target.repo.path / "snapshots" / target.commit
        aside = snapshot.with_name(snapshot.name + ".resync")
        if aside.exists() and not snapshot.exists():
            os.rename(aside, snapshot)


def pytest_startup_guard_races() -> dict[str, type[Race]]:  # in a conftest.py, this registers it
    return {"snapshot_resync": SnapshotResync}
