"""A child entry for test_child_entry.py: reports the collector as its imports and its run saw it."""

from __future__ import annotations

import gc
import json
from pathlib import Path

COLLECTING_AT_IMPORT = gc.isenabled()


def report(path: str) -> None:
    Path(path).write_text(json.dumps({
        "collecting_at_import": COLLECTING_AT_IMPORT,
        "collecting_at_run": gc.isenabled(),
        "frozen": gc.get_freeze_count(),
    }))  # fmt: skip
