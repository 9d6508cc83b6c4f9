"""The supervisor's pieces that need no engine: settings, the slot state machine, admission."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.runtimes.base import EngineHandle, EngineSpec
from manager.state.machine import EngineState
from manager.state.records import EngineRecord
from manager.supervisor.admission import loaded_count, unload_candidates
from manager.supervisor.settings import DEFAULT_KEEP_ALIVE_S, SupervisorSettings
from manager.supervisor.slot import InvalidLoadTransition, ModelSlot, SlotLock
from router.backend import Backend
from router.loader import LoadState
from router.registry import Registry


def _slot(name: str, state: LoadState = LoadState.UNLOADED, last_used: float = 0.0) -> ModelSlot:
    slot = ModelSlot(name, f"org/{name}", (), 1, 0, DEFAULT_KEEP_ALIVE_S, DEFAULT_KEEP_ALIVE_S, last_used=last_used)
    slot.state = state
    if state in (LoadState.LOADED, LoadState.UNLOADING):
        spec = EngineSpec(id=f"{name}-1", repo=slot.repo, model_dir=Path("/m"), served_name=name, port=1)
        handle = EngineHandle(spec, "process", 1, 0.0, Path("/log"), 0.0)
        slot.record = EngineRecord(handle, EngineState.READY)
    return slot


@pytest.mark.parametrize(
    ("value", "seconds"), [("", 300.0), ("3s", 3.0), ("1h30m", 5400.0), ("0", 0.0), ("-1", -1.0), ("45", 45.0)]
)
def test_keep_alive_from_env(monkeypatch: pytest.MonkeyPatch, value: str, seconds: float) -> None:
    monkeypatch.setenv("GOMGR_KEEP_ALIVE", value)
    assert SupervisorSettings.from_env().keep_alive_s == seconds


@pytest.mark.parametrize(("name", "value"), [("GOMGR_KEEP_ALIVE", "soon"), ("GOMGR_MAX_LOADED_MODELS", "0")])
def test_bad_settings_are_one_line(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        SupervisorSettings.from_env()


def test_transitions_are_compare_and_swap() -> None:
    lock, slot = SlotLock(), _slot("a")
    assert lock.transition(slot, LoadState.UNLOADED, LoadState.LOADING)
    assert not lock.transition(slot, LoadState.UNLOADED, LoadState.LOADING)  # already loading
    assert lock.transition(slot, LoadState.LOADING, LoadState.LOADED)
    with pytest.raises(InvalidLoadTransition):
        lock.transition(slot, LoadState.LOADED, LoadState.LOADING)
    assert slot.state is LoadState.LOADED


def test_the_cap_counts_admitted_loads_only() -> None:
    loading, other = _slot("a", LoadState.LOADING), _slot("b", LoadState.LOADING)
    loaded = _slot("c", LoadState.LOADED)
    assert loaded_count([loading, other, loaded], loading) == 1  # b not admitted yet
    other.admitted = True
    assert loaded_count([loading, other, loaded], loading) == 2


def test_unload_candidates_are_idle_and_least_recently_used_first() -> None:
    registry = Registry()
    old, new, busy = (_slot(n, LoadState.LOADED, t) for n, t in (("old", 1.0), ("new", 2.0), ("busy", 0.5)))
    busy.in_flight = 1
    for slot in (old, new, busy):
        assert slot.record is not None
        registry.register(Backend(slot.record.id, slot.name, "http://127.0.0.1:1"))
    assert unload_candidates([new, busy, old], registry) == [old, new]


def test_a_request_without_keep_alive_gets_the_default_again(tmp_path: Path) -> None:
    """Ollama's semantics: keep_alive 0 on one request does not stick to the next one."""
    from manager.models.store import ModelStore
    from manager.state.paths import StatePaths
    from manager.supervisor.supervisor import Supervisor

    settings = SupervisorSettings(keep_alive_s=DEFAULT_KEEP_ALIVE_S, max_loaded=None)
    supervisor = Supervisor(StatePaths(tmp_path / "state"), ModelStore(tmp_path / "store"), Registry(), settings)
    slot = _slot("m")
    supervisor._slots, supervisor._by_name = {"m": slot}, {"m": slot}  # NOTE: placed by hand
    supervisor.request_started("m", 0.0)
    supervisor.request_finished("m")
    assert slot.keep_alive_s == 0.0
    supervisor.request_started("m", None)
    assert slot.keep_alive_s == DEFAULT_KEEP_ALIVE_S
