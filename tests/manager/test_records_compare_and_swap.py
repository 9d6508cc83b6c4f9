"""Engine records change state by compare-and-swap (issue #23): of several writers holding the
same `ready` record, in threads or in separate processes, exactly one moves it."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from manager.runtimes.base import EngineHandle, EngineSpec
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore, StateConflict


def _ready(paths: StatePaths) -> EngineRecord:
    spec = EngineSpec(id="e-1", repo="org/m", model_dir=Path("/m"), served_name="org/m", port=1)
    record = EngineRecord(EngineHandle(spec, "process", 1, 0.0, Path("/log"), 0.0), EngineState.READY)
    RecordStore(paths).save(record)
    return record


def test_a_stale_copy_loses(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    record = _ready(paths)
    store = RecordStore(paths)
    assert store.set_state(record, EngineState.STOPPING).state is EngineState.STOPPING
    with pytest.raises(StateConflict, match="is stopping, no longer ready"):
        store.set_state(record, EngineState.FAILED)
    store.remove(record.id, keep_log=False)
    with pytest.raises(StateConflict, match="was removed"):
        store.set_state(record, EngineState.STOPPING)


def _try_stop(root: str, gate: Barrier, results: multiprocessing.Queue[bool]) -> None:
    paths = StatePaths(Path(root))
    record = RecordStore(paths).get("e-1")
    assert record is not None
    gate.wait(60)  # NOTE: every writer holds the ready record before any of them writes
    try:
        RecordStore(paths).set_state(record, EngineState.STOPPING)
        results.put(True)
    except StateConflict:
        results.put(False)


def test_one_of_many_processes_wins(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    _ready(paths)
    context = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[bool] = context.Queue()
    gate = context.Barrier(6)
    workers = [context.Process(target=_try_stop, args=(str(tmp_path), gate, results)) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    outcomes = [results.get(timeout=10) for _ in workers]
    assert outcomes.count(True) == 1
    assert RecordStore(paths).get("e-1").state is EngineState.STOPPING  # type: ignore[union-attr]
