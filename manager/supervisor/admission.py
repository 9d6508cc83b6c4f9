"""Which models count against GOMGR_MAX_LOADED_MODELS and against the memory of the device
their engine runs on, which may be unloaded for room, and the verdict on one more load."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from manager.supervisor.memory import DeviceMemory
from manager.supervisor.placement import Reservation, could_fit, does_not_fit, place
from manager.supervisor.settings import MAX_LOADED_ENV
from manager.supervisor.slot import ModelSlot
from router.loader import LoadFailed, LoadState
from router.registry import Registry

# NOTE: how long a load no request has reached yet is kept from unloading, so a load whose
# every waiter left is not kept for ever.
FRESH_S = 2.0


@dataclass(frozen=True)
class Verdict:
    """Admitted (on `gpu`, None: the host), or not yet: unload `victim` first, else wait."""

    admitted: bool
    gpu: int | None = None
    victim: ModelSlot | None = None
    at_cap: bool = False  # waiting for the count; else for memory


def judge(
    loading: ModelSlot, slots: list[ModelSlot], devices: Sequence[DeviceMemory],
    registry: Registry, cap: int | None,
) -> Verdict:
    """The verdict on `loading` (its footprint read) now; LoadFailed, with the numbers, when
    it cannot fit even with every engine the supervisor placed there unloaded."""
    at_cap = cap is not None and loaded_count(slots, loading) >= cap
    victims = unload_candidates(slots, registry)
    if not at_cap:
        footprint, held = loading.footprint, reservations(slots, loading)
        need = footprint.total if footprint else 0
        fits_alone = could_fit(need, devices, held)
        if footprint is not None and not fits_alone:
            raise LoadFailed(does_not_fit(loading.name, footprint, devices, held))
        if (device := place(need, devices, held)) is not None:
            return Verdict(admitted=True, gpu=device.gpu)
        helpful = {d.gpu for d in fits_alone}
        victims = [v for v in victims if v.gpu in helpful]
    return Verdict(admitted=False, victim=victims[0] if victims else None, at_cap=at_cap)


def waited_too_long(loading: ModelSlot, verdict: Verdict, cap: int | None, waited_s: float) -> str:
    full = f"{cap} model(s) are loaded ({MAX_LOADED_ENV}={cap})" if verdict.at_cap else (
        f"{loading.name} needs {loading.footprint.describe() if loading.footprint else 'more'}: "
        "the models loaded where it would fit"
    )
    return f"{full} and none went idle within {waited_s:.0f} s to make room for {loading.name}"


def loaded_count(slots: list[ModelSlot], loading: ModelSlot) -> int:
    """Models holding an engine (or admitted to start one), besides `loading`.

    NOTE: engines started by hand are pinned and not counted: the cap is on what the
    supervisor loads, as it can unload only those.
    """
    return sum(1 for s in slots if s is not loading and _holds(s))


def reservations(slots: list[ModelSlot], loading: ModelSlot) -> list[Reservation]:
    """The footprints of the engines the supervisor placed (or admitted to start), besides
    `loading`'s. NOTE: a pinned engine's memory is in the devices' measured free bytes."""
    return [
        Reservation(s.gpu, s.footprint.total, running=s.state is not LoadState.LOADING)
        for s in slots
        if s is not loading and s.footprint is not None and _holds(s)
    ]


def unload_candidates(slots: list[ModelSlot], registry: Registry) -> list[ModelSlot]:
    """Loaded models with no request in flight, least recently used first; not one that has
    just loaded and that no request has reached yet (`fresh_until`).

    NOTE: the requests held for a load resume a few event-loop turns after it ends; another
    model's admission in between must not take the engine they were waiting for.
    """
    now = time.monotonic()
    idle = [
        s for s in slots
        if s.state is LoadState.LOADED and s.in_flight == 0 and s.record is not None
        and registry.inflight(s.record.id) == 0 and s.fresh_until <= now
    ]
    return sorted(idle, key=lambda s: s.last_used)


def _holds(slot: ModelSlot) -> bool:
    return slot.state in (LoadState.LOADED, LoadState.UNLOADING) or (
        slot.state is LoadState.LOADING and slot.admitted
    )
