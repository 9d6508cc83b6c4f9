"""Check 5: the model store's filesystem has room for a download."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from manager.readiness.blocker import EVERY_RUNTIME, Blocker

# NOTE: room kept free beyond the download itself, so the filesystem is not filled to the
# last byte (the store stages a pull next to its target, and logs keep growing).
DEFAULT_MARGIN_BYTES = 1024**3


@dataclass(frozen=True)
class DiskStatus:
    path: Path  # the existing directory whose filesystem was measured
    free_bytes: int
    blockers: tuple[Blocker, ...]


def existing_parent(path: Path) -> Path:
    """`path` itself, or its nearest ancestor that exists (a store not created yet)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def check_disk(
    store_root: Path, needed_bytes: int, margin_bytes: int = DEFAULT_MARGIN_BYTES
) -> DiskStatus:
    """A blocker when free space is below `needed_bytes + margin_bytes`."""
    where = existing_parent(store_root)
    free = shutil.disk_usage(where).free
    if free >= needed_bytes + margin_bytes:
        return DiskStatus(where, free, ())
    blocker = Blocker(
        id="disk-space-low",
        title=f"Not enough disk space in {store_root}",
        explanation=(
            f"The download needs {_gb(needed_bytes)} plus {_gb(margin_bytes)} to spare, but the "
            f"filesystem of {where} has {_gb(free)} free."
        ),
        fix_steps=(
            "Remove models you no longer use: `gomgr models list`, then `gomgr models rm REPO`.",
            "Or point the store at a bigger disk: `export GOMGR_MODELS_DIR=/path/with/room`.",
            "Run `gomgr doctor REPO` again.",
        ),
        severity="blocks",
        blocks=EVERY_RUNTIME,
    )
    return DiskStatus(where, free, (blocker,))


def _gb(size: int) -> str:
    return f"{size / 1e9:.2f} GB"
