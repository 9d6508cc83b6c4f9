"""The engine state machine, engine records and the process runtime's liveness check, no engine."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from manager.runtimes.base import EngineHandle, EngineSpec
from manager.runtimes.registry import get_runtime
from manager.state.machine import EngineState, InvalidTransition, transition
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore


def _record(tmp_path: Path, pid: int, create_time: float) -> EngineRecord:
    spec = EngineSpec(id="e1", repo="org/m", model_dir=tmp_path, served_name="org/m", port=1234,
                      engine_args=("--model-path", str(tmp_path)), env=(("A", "1"),))
    handle = EngineHandle(spec=spec, runtime="process", pid=pid, create_time=create_time,
                          log_path=tmp_path / "e1.log", started_at=time.time())
    return EngineRecord(handle, EngineState.STARTING)


def test_the_machine_allows_only_its_transitions() -> None:
    assert transition(EngineState.STARTING, EngineState.READY) is EngineState.READY
    with pytest.raises(InvalidTransition):
        transition(EngineState.STOPPING, EngineState.READY)
    with pytest.raises(InvalidTransition):
        transition(EngineState.STOPPED, EngineState.READY)


def test_records_round_trip_and_state_changes_are_checked(tmp_path: Path) -> None:
    store = RecordStore(StatePaths(tmp_path))
    record = _record(tmp_path, 1, 0.0)
    store.save(record)
    assert store.get("e1") == record
    assert store.pid_path("e1").read_text() == "1\n"
    ready = store.set_state(record, EngineState.READY)
    assert store.all() == [ready]
    with pytest.raises(InvalidTransition):
        store.set_state(ready, EngineState.STARTING)
    store.remove("e1", keep_log=False)
    assert store.all() == [] and not store.pid_path("e1").exists()


def test_a_reused_pid_is_not_taken_for_the_engine(tmp_path: Path) -> None:
    runtime = get_runtime("process", StatePaths(tmp_path))
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as child:
        created = psutil.Process(child.pid).create_time()
        assert runtime.is_alive(_record(tmp_path, child.pid, created).handle)
        assert not runtime.is_alive(_record(tmp_path, child.pid, created - 100).handle)
        child.kill()
        child.wait()
    assert not runtime.is_alive(_record(tmp_path, child.pid, created).handle)
