"""Memory-aware admission with a fake NVML (this machine has no NVIDIA GPU): the GPU an engine
is placed on, the room engines still starting take, and the error of a model that cannot fit
even alone. The model's footprint is readiness' estimate for the real SmolLM2."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from manager.models.store import ModelStore
from manager.readiness.memory import GIB, MemoryEstimate
from manager.runtimes.base import EngineHandle, EngineSpec
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord
from manager.supervisor.admission import judge
from manager.supervisor.footprint import Footprint, footprint_of
from manager.supervisor.memory import DeviceMemory, SystemMemory
from manager.supervisor.placement import Reservation, could_fit, place, room
from manager.supervisor.settings import SupervisorSettings
from manager.supervisor.slot import ModelSlot
from manager.supervisor.supervisor import Supervisor
from router.backend import Backend
from router.loader import LoadFailed, LoadState
from router.registry import Registry
from tests.conftest import SMOLLM2_REPO
from tests.manager.readiness.test_readiness_gpu import FakeNvmlProbe


def _gpu(index: int, free_gib: float, total_gib: float = 80) -> DeviceMemory:
    return DeviceMemory(index, f"GPU {index}", int(total_gib * GIB), int(free_gib * GIB))


def _slot(
    name: str, size_gib: float, registry: Registry, gpu: int | None = None, last_used: float = 0.0
) -> ModelSlot:
    """A model of `size_gib`; loaded (and routed) on `gpu` when given one."""
    size = int(size_gib * GIB)
    footprint = Footprint(MemoryEstimate(size, 0, 0, size), 8192)
    slot = ModelSlot(name, f"org/{name}", (), size, 0, 300.0, 300.0, footprint=footprint, last_used=last_used)
    if gpu is not None:
        spec = EngineSpec(id=f"{name}-1", repo=slot.repo, model_dir=Path("/m"), served_name=name, port=1)
        handle = EngineHandle(spec, "process", 1, 0.0, Path("/log"), 0.0)
        slot.record, slot.state, slot.gpu = EngineRecord(handle, EngineState.READY), LoadState.LOADED, gpu
        registry.register(Backend(spec.id, name, "http://127.0.0.1:1"))
    return slot


def _supervisor(smollm2_dir: Path, tmp_path: Path, *free_gib: float) -> Supervisor:
    return Supervisor(
        StatePaths(tmp_path / "state"), ModelStore(smollm2_dir.parents[1]), Registry(),
        SupervisorSettings(keep_alive_s=300, max_loaded=None), SystemMemory(FakeNvmlProbe(*free_gib)),
    )


def test_the_fake_nvml_gpus_are_the_places() -> None:
    devices = SystemMemory(FakeNvmlProbe(2.0, 40.0)).devices()
    assert [(d.gpu, d.free_bytes) for d in devices] == [(0, 2 * GIB), (1, 40 * GIB)]
    assert devices[1].name == "GPU 1 (Fake H100)"


def test_without_gpus_the_host_is_the_place_capped_by_the_limit() -> None:
    [host] = SystemMemory(FakeNvmlProbe(), host_limit=GIB).devices()
    assert host.gpu is None
    assert host.total_bytes == GIB
    assert host.free_bytes <= GIB


def test_the_gpu_with_the_most_room_that_fits_is_chosen() -> None:
    devices = [_gpu(0, 30), _gpu(1, 40), _gpu(2, 10)]
    assert place(20 * GIB, devices, []) == devices[1]
    # NOTE: an engine still starting on GPU 1 takes its footprint from the free bytes measured.
    starting = [Reservation(1, 25 * GIB, running=False)]
    assert room(devices[1], starting) == 15 * GIB
    assert place(20 * GIB, devices, starting) == devices[0]
    assert place(35 * GIB, devices, starting) is None
    assert could_fit(35 * GIB, devices, starting) == [devices[1]]


def test_room_is_at_most_the_total_less_what_the_supervisor_placed() -> None:
    # NOTE: a loaded engine whose KV pages are not touched yet shows as free memory.
    gpu = _gpu(0, 70)
    assert room(gpu, [Reservation(0, 30 * GIB, running=True)]) == 50 * GIB
    assert could_fit(75 * GIB, [gpu], [Reservation(0, 30 * GIB, running=True)]) == [gpu]


def test_smollm2_footprint_is_readiness_estimate_for_its_context(smollm2_dir: Path) -> None:
    footprint = footprint_of(SMOLLM2_REPO, smollm2_dir)
    assert footprint is not None
    assert footprint.context_tokens == 8192  # manifests/smollm2.yaml
    e = footprint.estimate
    assert e.total == e.weights + e.kv_cache + e.overhead
    assert "KV cache" in footprint.describe() and "8192 tokens" in footprint.describe()


def test_the_engine_is_placed_on_the_gpu_with_room(smollm2_dir: Path, tmp_path: Path) -> None:
    supervisor = _supervisor(smollm2_dir, tmp_path, 1.0, 30.0, 20.0)
    [slot] = [s for s in supervisor._slots.values() if s.repo == SMOLLM2_REPO]
    asyncio.run(supervisor._admit(slot))
    assert slot.admitted
    assert slot.gpu == 1


def test_a_model_that_cannot_fit_alone_fails_with_the_numbers(
    smollm2_dir: Path, tmp_path: Path
) -> None:
    supervisor = _supervisor(smollm2_dir, tmp_path, 0.5, 1.0)
    [slot] = [s for s in supervisor._slots.values() if s.repo == SMOLLM2_REPO]
    with pytest.raises(LoadFailed) as failed:
        asyncio.run(supervisor.ensure_loaded(slot.name))
    message = str(failed.value)
    assert message.startswith(f"{slot.name} needs ")
    assert "weights" in message and "KV cache" in message and "overhead" in message
    assert "GPU 1 (Fake H100) has 1.00 GiB free of 80.00 GiB" in message
    assert slot.state is LoadState.UNLOADED
    assert not list((tmp_path / "state").glob("**/*.json"))  # nothing was started


def test_at_the_cap_the_least_recently_used_idle_model_goes_first() -> None:
    registry = Registry()
    old, new = _slot("old", 10, registry, 0, last_used=1.0), _slot("new", 10, registry, 1, last_used=2.0)
    loading = _slot("next", 10, registry)
    verdict = judge(loading, [new, old, loading], [_gpu(0, 60), _gpu(1, 60)], registry, cap=2)
    assert (verdict.admitted, verdict.victim, verdict.at_cap) == (False, old, True)


def test_for_memory_only_an_idle_model_where_it_would_fit_goes() -> None:
    registry = Registry()
    # NOTE: GPU 0: 40 GiB of ours and 30 free; GPU 1: 20 free, the rest another program's.
    on_0, on_1 = _slot("on0", 40, registry, 0, last_used=2.0), _slot("on1", 5, registry, 1, last_used=1.0)
    loading = _slot("big", 50, registry)
    devices = [_gpu(0, 30), _gpu(1, 20)]
    verdict = judge(loading, [on_0, on_1, loading], devices, registry, cap=None)
    assert (verdict.admitted, verdict.victim, verdict.at_cap) == (False, on_0, False)
    on_0.in_flight = 1  # NOTE: busy: wait for it
    assert judge(loading, [on_0, on_1, loading], devices, registry, cap=None).victim is None
    admitted = judge(loading, [on_1, loading], [_gpu(0, 70), _gpu(1, 20)], registry, cap=None)
    assert (admitted.admitted, admitted.gpu) == (True, 0)
