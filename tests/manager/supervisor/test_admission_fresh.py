"""A model that has just loaded, with no request reaching it yet, is not unloaded for room:
its held requests resume a few event-loop turns after the load ends."""

from __future__ import annotations

import time
from pathlib import Path

from manager.runtimes.base import EngineHandle, EngineSpec
from manager.state.machine import EngineState
from manager.state.records import EngineRecord
from manager.supervisor.admission import FRESH_S, unload_candidates
from manager.supervisor.slot import ModelSlot
from router.backend import Backend
from router.loader import LoadState
from router.registry import Registry


def _loaded(registry: Registry) -> ModelSlot:
    slot = ModelSlot("m", "org/m", (), 1, 0, 300.0, 300.0, state=LoadState.LOADED)
    spec = EngineSpec(id="m-1", repo=slot.repo, model_dir=Path("/m"), served_name="m", port=1)
    slot.record = EngineRecord(EngineHandle(spec, "process", 1, 0.0, Path("/log"), 0.0), EngineState.READY)
    registry.register(Backend("m-1", "m", "http://127.0.0.1:1"))
    return slot


def test_a_fresh_load_is_no_candidate_until_it_goes_stale() -> None:
    registry = Registry()
    slot = _loaded(registry)
    slot.fresh_until = time.monotonic() + FRESH_S
    assert unload_candidates([slot], registry) == []
    slot.fresh_until = time.monotonic() - 0.01  # NOTE: its waiters left long ago
    assert unload_candidates([slot], registry) == [slot]
