"""The engine's on-disk caches: where they live, and how an entry is written so that processes
building the same entry at once never see half of one."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root(name: str, override_env: str) -> Path:
    """``$override_env`` if set, else ``$XDG_CACHE_HOME/gomgr-engine/<name>`` (``~/.cache``)."""
    override = os.environ.get(override_env)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gomgr-engine" / name


@contextmanager
def staged_entry(target: Path, complete_marker: str) -> Iterator[Path]:
    """A fresh directory beside ``target`` to write the entry in; renamed to ``target`` at the end.

    NOTE: a rename is atomic: the server's processes may build the same entry at once (its
    children start together); each finds a whole directory or none. The loser's rename fails
    and is dropped once ``target/complete_marker`` exists.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        yield staging
        staging.rename(target)
    except OSError:
        if not (target / complete_marker).is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
