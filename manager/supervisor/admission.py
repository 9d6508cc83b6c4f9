"""Which models count against GOMGR_MAX_LOADED_MODELS, and which may be unloaded for room."""

from __future__ import annotations

from manager.supervisor.slot import ModelSlot
from router.loader import LoadState
from router.registry import Registry


def loaded_count(slots: list[ModelSlot], loading: ModelSlot) -> int:
    """Models holding an engine (or admitted to start one), besides `loading`.

    NOTE: engines started by hand are pinned and not counted: the cap is on what the
    supervisor loads, as it can unload only those.
    """
    return sum(
        1 for s in slots
        if s is not loading and (
            s.state in (LoadState.LOADED, LoadState.UNLOADING)
            or (s.state is LoadState.LOADING and s.admitted)
        )
    )


def unload_candidates(slots: list[ModelSlot], registry: Registry) -> list[ModelSlot]:
    """Loaded models with no request in flight, least recently used first."""
    idle = [
        s for s in slots
        if s.state is LoadState.LOADED and s.in_flight == 0 and s.record is not None
        and registry.inflight(s.record.id) == 0
    ]
    return sorted(idle, key=lambda s: s.last_used)
