"""What a spawned server child runs around its entry (engine/server/supervisor.py `_run_child`):
its imports without the cyclic collector, which runs again, over none of them, once the entry
is called."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

from engine.server.supervisor import EntryPoint, _run_child


def test_a_child_imports_its_entry_with_the_collector_off_and_runs_it_with_the_imports_frozen(tmp_path: Path) -> None:
    out = tmp_path / "gc.json"
    child = multiprocessing.get_context("spawn").Process(
        target=_run_child, args=(os.getpid(), EntryPoint("tests.engine.server.gc_probe", "report"), str(out))
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    seen = json.loads(out.read_text())
    assert seen["collecting_at_import"] is False
    assert seen["collecting_at_run"] is True
    assert seen["frozen"] > 10_000  # NOTE: the entry's imports, and the interpreter's own
