"""Which models count against GOMGR_MAX_LOADED_MODELS and against the memory of the device
their engine runs on, and which may be unloaded for room."""

from __future__ import annotations

import time

from manager.supervisor.placement import Reservation
from manager.supervisor.slot import ModelSlot
from router.loader import LoadState
from router.registry import Registry

# NOTE: how long a load no request has reached yet is kept from unloading, so a load whose
# every waiter left is not kept for ever.
FRESH_S = 2.0


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
