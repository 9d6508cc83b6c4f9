"""One model's place in the supervisor: its load state, its engine, its requests, its expiry.

Every state change goes through `SlotLock.transition`, compare-and-swap under one lock:
unloaded → loading → loaded → unloading → unloaded (a failed load goes back to unloaded).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from manager.lifecycle.desired_state import DesiredEngine
from manager.state.records import EngineRecord
from manager.supervisor.footprint import Footprint
from router.loader import LoadState

_ALLOWED: dict[LoadState, frozenset[LoadState]] = {
    LoadState.UNLOADED: frozenset({LoadState.LOADING}),
    LoadState.LOADING: frozenset({LoadState.LOADED, LoadState.UNLOADED}),
    LoadState.LOADED: frozenset({LoadState.UNLOADING}),
    LoadState.UNLOADING: frozenset({LoadState.UNLOADED}),
}


class InvalidLoadTransition(Exception):
    def __init__(self, name: str, current: LoadState, new: LoadState) -> None:
        super().__init__(f"model {name}: load state {current} cannot become {new}")


@dataclass(eq=False)
class ModelSlot:
    name: str  # the served name
    repo: str  # the store's repo id, what the engine is started from
    aliases: tuple[str, ...]
    size_bytes: int | None
    created: int
    keep_alive_s: float  # the last request's keep_alive, else the default
    default_keep_alive_s: float  # GOMGR_KEEP_ALIVE, or the --keep-alive of a gomgr start
    state: LoadState = LoadState.UNLOADED
    entry: DesiredEngine | None = None  # the desired-state entry it is (catalog.py)
    record: EngineRecord | None = None  # the engine, while loaded or unloading
    task: asyncio.Task[None] | None = None  # the load or unload under way (or last done)
    admitted: bool = False  # a load counted against the cap (settings.max_loaded)
    footprint: Footprint | None = None  # what it needs loaded; None: unknown (or not read yet)
    gpu: int | None = None  # where admission placed its engine; None: the host
    in_flight: int = 0
    last_used: float = 0.0  # time.monotonic() of the last request's start or end
    fresh_until: float = 0.0  # time.monotonic(): loaded, no request reached it yet (admission.py)
    expires_at: float | None = None  # unix seconds; None: never (or not loaded)
    written_expiry: float | None = field(default=None, repr=False)  # in the record's labels

    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


class SlotLock:
    """The one lock around every slot's state change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def transition(self, slot: ModelSlot, expected: LoadState, new: LoadState) -> bool:
        """Move `slot` from `expected` to `new`; False (and no change) if it is elsewhere."""
        if new not in _ALLOWED[expected]:
            raise InvalidLoadTransition(slot.name, expected, new)
        with self._lock:
            if slot.state is not expected:
                return False
            slot.state = new
            return True

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *_exc: object) -> None:
        self._lock.release()
