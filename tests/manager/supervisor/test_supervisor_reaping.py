"""The exit reaper over a real process (kill -9), and the crash backoff's schedule."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from manager.lifecycle.backoff import BackoffPolicy
from manager.runtimes.base import EngineHandle, EngineSpec
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore
from manager.supervisor.crash_backoff import POLICY, CrashBackoff
from manager.supervisor.reaping import Death, ExitReaper
from router.backend import Backend
from router.errors import RouterError
from router.registry import Registry

ROUTE_GONE_S = 2.0
CLEANED_S = 10.0


def _record(paths: StatePaths, engine_id: str, pid: int, state: EngineState, started_at: float) -> EngineRecord:
    store = RecordStore(paths)
    spec = EngineSpec(id=engine_id, repo="org/m", model_dir=Path("/m"), served_name="org/m", port=1)
    create_time = psutil.Process(pid).create_time() if pid else 0.0
    handle = EngineHandle(spec, "process", pid, create_time, store.log_path(engine_id), started_at)
    record = EngineRecord(handle, state)
    store.save(record)
    return record


def _death(started_at: float, exit_code: int | None = 137, last_line: str = "boom") -> Death:
    spec = EngineSpec(id="e", repo="org/m", model_dir=Path("/m"), served_name="org/m", port=1)
    handle = EngineHandle(spec, "docker", 1, 0.0, Path("/log"), started_at)
    return Death(EngineRecord(handle, EngineState.READY), exit_code, last_line)


def test_a_killed_engine_process_loses_route_and_record_and_is_logged_once(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    engine = subprocess.Popen(["sleep", "60"], start_new_session=True)
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        record = _record(paths, "crashy", engine.pid, EngineState.READY, time.time())
        record.handle.log_path.write_text("loading\nlast words\n\n")
        # NOTE: dead, but its owner is stopping it: not the reaper's.
        stopping = _record(paths, "stopping", bystander.pid, EngineState.STOPPING, time.time())
        bystander.kill()
        bystander.wait()
        deaths: list[Death] = []

        async def run() -> None:
            registry = Registry()
            for engine_id in ("crashy", "stopping"):
                registry.register(Backend(id=engine_id, model="org/m", base_url="http://127.0.0.1:1"))
            reaper = ExitReaper(paths, registry, lambda d: deaths.append(d) or "what next")
            await reaper.start()
            try:
                await reaper.reap()
                assert registry.get("crashy") is not None  # alive: left alone
                engine.send_signal(signal.SIGKILL)
                killed = time.monotonic()
                while registry.get("crashy") is not None:
                    assert time.monotonic() - killed < ROUTE_GONE_S, "the route outlived the engine"
                    await asyncio.sleep(0.05)
                while not deaths:
                    assert time.monotonic() - killed < CLEANED_S, "no death was reported"
                    await asyncio.sleep(0.05)
                assert registry.get("stopping") is not None
            finally:
                await reaper.stop()

        asyncio.run(run())
        store = RecordStore(paths)
        assert store.get("crashy") is None
        assert record.handle.log_path.exists()  # kept for the post-mortem
        assert store.get(stopping.id) is not None
        [death] = deaths
        assert (death.record.id, death.exit_code, death.last_line) == ("crashy", -9, "last words")
        line = death.describe("what next")
        assert "crashy" in line and "exit code -9" in line and '"last words"' in line
        assert line.endswith("what next")
    finally:
        for process in (engine, bystander):
            process.kill()


def test_the_policy_doubles_from_1s_to_a_30s_cap() -> None:
    assert [POLICY.delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_short_backoffs_hold_the_request_and_long_ones_answer_503() -> None:
    crashes = CrashBackoff(BackoffPolicy(first_s=0.05, cap_s=1.0, reset_after_s=60.0), hold_max_s=0.15)

    async def run() -> None:
        assert await crashes.wait_out("org/m") is False  # never crashed
        assert "crashes in a row: 1" in crashes.crashed("org/m", _death(time.time()))
        began = time.monotonic()
        assert await crashes.wait_out("org/m") is True
        assert time.monotonic() - began >= 0.04
        assert await crashes.wait_out("org/m") is False  # waited out
        crashes.crashed("org/m", _death(time.time()))  # 0.1 s: still held
        assert await crashes.wait_out("org/m") is True
        told = crashes.crashed("org/m", _death(time.time(), 137, "CUDA error"))  # 0.2 s
        assert "get a 503" in told
        with pytest.raises(RouterError) as refused:
            await crashes.wait_out("org/m")
        error = refused.value
        assert (error.status, error.code, error.headers) == (503, "model_crashed", {"Retry-After": "1"})
        assert "crashed 3 times in a row" in error.message
        assert 'exit code 137; last log line: "CUDA error"' in error.message

    asyncio.run(run())


def test_an_engine_that_stayed_up_starts_the_count_again() -> None:
    crashes = CrashBackoff()
    crashes.crashed("org/m", _death(time.time()))
    crashes.crashed("org/m", _death(time.time()))
    told = crashes.crashed("org/m", _death(time.time() - POLICY.reset_after_s - 1))
    assert "crashes in a row: 1;" in told and "after 1 s" in told
