"""Files the plugin reads back are checked before a field is read: a fake cache's marker.

(The JSON report read by ``startup-guard-report``: tests/test_report_reading.py; a plan in
``STARTUP_GUARD_PLAN``: tests/test_stale_plan.py.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_startup_guard import FakeHubCache, UnsafeCacheError
from pytest_startup_guard.cache.hubcache import MARKER_NAME


@pytest.mark.parametrize(
    ("marker", "found"),
    [
        ('{"created_by": "pytest-startup-guard", "shared": "no"}', "'shared': 'no'"),
        ('{"created_by": "pytest-startup-guard", "shared": NaN}', "NaN is not JSON"),
        ('{"created_by": "someone else", "shared": false}', "'someone else'"),
        ("[" * 2000 + "]" * 2000, "recursion"),
        ('{"shared": false, "pad": "' + "x" * 5000 + '"}', "over 4096 bytes"),
        ("\xff", "codec can't decode"),
    ],
    ids=["shared_text", "nan", "another_creator", "deep", "huge", "not_utf8"],
)
def test_a_marker_that_is_not_what_the_plugin_wrote_is_refused_naming_it(
    tmp_path: Path, marker: str, found: str
) -> None:
    (tmp_path / MARKER_NAME).write_bytes(marker.encode("latin-1"))
    with pytest.raises(UnsafeCacheError) as refused:
        FakeHubCache(tmp_path)
    message = str(refused.value)
    assert f"unreadable marker {tmp_path / MARKER_NAME}" in message, message
    assert 'expected {"created_by": "pytest-startup-guard", "shared": true or false}' in message
    assert found in message, message


def test_the_marker_the_plugin_writes_is_read_back(tmp_path: Path) -> None:
    FakeHubCache(tmp_path / "cache", shared=True)
    marker = json.loads((tmp_path / "cache" / MARKER_NAME).read_text())
    assert marker == {"created_by": "pytest-startup-guard", "shared": True}
    assert FakeHubCache(tmp_path / "cache", shared=True).shared
    with pytest.raises(UnsafeCacheError, match="is a shared fake cache; open it with shared=True"):
        FakeHubCache(tmp_path / "cache")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_as_marker_is_no_marker_and_never_blocks(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / MARKER_NAME)
    with pytest.raises(UnsafeCacheError, match=r"has no \.startup_guard_cache marker"):
        FakeHubCache(tmp_path)
