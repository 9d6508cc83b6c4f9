"""The disk check measures the real filesystem of the store (or its nearest parent)."""

from __future__ import annotations

import shutil
from pathlib import Path

from manager.readiness.disk import check_disk


def test_more_than_free_is_a_blocker(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    status = check_disk(tmp_path / "store-not-created", free * 2, margin_bytes=0)
    assert status.path == tmp_path
    (blocker,) = status.blockers
    assert blocker.id == "disk-space-low"
    assert set(blocker.blocks) == {"docker", "process"}


def test_less_than_free_is_fine(tmp_path: Path) -> None:
    status = check_disk(tmp_path, 1024, margin_bytes=0)
    assert status.blockers == ()
    assert status.free_bytes > 1024


def test_margin_counts(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    assert check_disk(tmp_path, 0, margin_bytes=free * 2).blockers
