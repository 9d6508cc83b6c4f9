"""`Supervisor`: the router's on-demand loader (router/loader.py) and owner of what it loads.

A request for a store model no engine serves makes the router call `ensure_loaded`: one load
task per model (single flight), the engine started by `start_engine` in a worker thread. A
loaded model's keep-alive counts from its last request's end; the reaper task unloads it when
that passes with no request in flight. Engines started by hand (`gomgr start`) are pinned: the
supervisor never loads over or unloads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import Any

from manager.lifecycle.desired_state import DesiredState
from manager.models.store import ModelStore
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord
from manager.supervisor.admission import FRESH_S, judge, unload_candidates, waited_too_long
from manager.supervisor.applied_state import recall
from manager.supervisor.catalog import StoreModel, follow, offered_models
from manager.supervisor.crash_backoff import CrashBackoff
from manager.supervisor.engines import (
    failure_message,
    loaded_on_demand,
    running_engines,
    start_on_demand,
    stop_on_demand,
    write_expiry,
)
from manager.supervisor.footprint import store_footprint
from manager.supervisor.memory import MemoryProbe, SystemMemory
from manager.supervisor.reaping import Death, ExitReaper
from manager.supervisor.settings import SupervisorSettings
from manager.supervisor.slot import ModelSlot, SlotLock
from router.backend import Backend, BackendState
from router.errors import model_not_found
from router.loader import CatalogEntry, LoadFailed, LoadState, ModelLoader
from router.registry import Registry

logger = logging.getLogger(__name__)

REAP_TICK_S = 0.5
STORE_RESCAN_S = 2.0
ADMIT_POLL_S = 0.1
# NOTE: the expiry in a record is rewritten only when it moves by more than this, so a busy
# model costs at most about one small file write a second.
EXPIRY_WRITE_SLACK_S = 1.0


class Supervisor(ModelLoader):
    def __init__(
        self, paths: StatePaths, store: ModelStore, registry: Registry, settings: SupervisorSettings,
        memory: MemoryProbe | None = None, adopt: tuple[EngineRecord, ...] | None = None,
    ) -> None:
        """`adopt`: the engines to route as it starts (None: those running then)."""
        self._paths = paths
        self._adopt_at_start = adopt
        self._store = store
        self._registry = registry
        self._settings = settings
        self._memory = memory or SystemMemory(host_limit=settings.host_memory_limit)
        self._lock = SlotLock()
        self._slots: dict[str, ModelSlot] = {}  # by served name
        self._by_name: dict[str, ModelSlot] = {}  # by served name and alias
        self._wake = asyncio.Event()
        self._reaper: asyncio.Task[None] | None = None
        self._crashes = CrashBackoff()
        self._exits = ExitReaper(paths, registry, self._engine_died)
        self._desired = recall(paths)
        self._refresh(offered_models(store, self._desired))

    # -- ModelLoader ---------------------------------------------------------------------

    async def start(self) -> None:
        found = self._adopt_at_start
        for record in found if found is not None else await asyncio.to_thread(running_engines, self._paths):
            self._adopt(record)
        await self._exits.start()
        self._reaper = asyncio.create_task(self._reap(), name="supervisor reaper")

    async def stop(self) -> None:
        """Unload every model this supervisor loaded; pinned engines stay."""
        await self._exits.stop()
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        loads = [s.task for s in self._slots.values() if s.state is LoadState.LOADING and s.task]
        await asyncio.gather(*loads, return_exceptions=True)
        for slot in self._slots.values():
            self._begin_unload(slot)
        unloads = [s.task for s in self._slots.values() if s.state is LoadState.UNLOADING and s.task]
        await asyncio.gather(*unloads, return_exceptions=True)

    def catalog(self) -> list[CatalogEntry]:
        return [self._entry(slot) for slot in self._slots.values()]

    def entry(self, model: str) -> CatalogEntry | None:
        slot = self._by_name.get(model)
        return None if slot is None else self._entry(slot)

    async def ensure_loaded(self, model: str) -> None:
        slot = self._by_name.get(model)
        if slot is None:
            raise model_not_found(model, sorted(self._slots))
        while True:
            if slot.state is LoadState.LOADED:
                record = slot.record
                if record is not None and self._registry.get(record.id) is not None:
                    return
                # NOTE: loaded, yet routed nowhere: the engine died and the router's health
                # monitor was first to see it (the reaper cleans up and counts the crash), or
                # it was stopped from outside; either way, load again.
                if record is not None:
                    await self._exits.reap(record.id)
                    if slot.record is not record:
                        continue
                self._begin_unload(slot)
            elif slot.state is LoadState.UNLOADED:
                if await self._crashes.wait_out(slot.name):
                    continue
                self._begin_load(slot)
            assert slot.task is not None
            # NOTE: shielded: a caller that goes away does not cancel the load others await.
            await asyncio.shield(slot.task)

    def request_started(self, model: str, keep_alive_s: float | None) -> None:
        slot = self._by_name.get(model)
        if slot is None:
            return
        slot.in_flight += 1
        slot.last_used = time.monotonic()
        slot.fresh_until = 0.0
        # NOTE: as Ollama: a request's keep_alive holds for it, one without gets the default.
        slot.keep_alive_s = slot.default_keep_alive_s if keep_alive_s is None else keep_alive_s

    def request_finished(self, model: str) -> None:
        slot = self._by_name.get(model)
        if slot is None or slot.in_flight == 0:
            return
        slot.in_flight -= 1
        slot.last_used = time.monotonic()
        if slot.in_flight == 0:
            self._set_expiry(slot)
            if slot.keep_alive_s == 0:
                self._wake.set()

    # -- transitions ---------------------------------------------------------------------

    def _begin_load(self, slot: ModelSlot) -> None:
        if self._lock.transition(slot, LoadState.UNLOADED, LoadState.LOADING):
            slot.admitted = False
            slot.task = self._task(self._load(slot), f"load {slot.name}")

    def _begin_unload(self, slot: ModelSlot) -> None:
        if not self._lock.transition(slot, LoadState.LOADED, LoadState.UNLOADING):
            return
        if slot.record is not None:
            # NOTE: off the route first, in this loop: no new request can reach an engine
            # that is about to end (the dispatcher then holds it and loads the model again).
            self._registry.remove(slot.record.id, "unloaded by the supervisor")
        slot.task = self._task(self._unload(slot), f"unload {slot.name}")

    async def _load(self, slot: ModelSlot) -> None:
        try:
            await self._admit(slot)
            record = await asyncio.to_thread(
                start_on_demand, slot.repo, slot.name, slot.aliases, self._paths,
                self._settings.start_timeout_s, slot.gpu, slot.footprint, slot.entry,
            )
        except BaseException as exc:
            self._lock.transition(slot, LoadState.LOADING, LoadState.UNLOADED)
            if isinstance(exc, LoadFailed | asyncio.CancelledError):
                raise
            raise LoadFailed(failure_message(exc)) from exc
        # NOTE: start_engine saw /health answer 200 before registering: ready now, without
        # waiting for the health monitor's next probe.
        self._registry.set_state(record.id, BackendState.READY, "loaded on demand")
        slot.record = record
        slot.last_used = time.monotonic()
        slot.fresh_until = slot.last_used + FRESH_S
        self._lock.transition(slot, LoadState.LOADING, LoadState.LOADED)
        self._set_expiry(slot)
        logger.info("loaded %s (engine %s)", slot.name, record.id)

    async def _unload(self, slot: ModelSlot) -> None:
        record = slot.record
        try:
            if record is not None:
                await asyncio.to_thread(stop_on_demand, record, self._paths)
                logger.info("unloaded %s (engine %s)", slot.name, record.id)
        finally:
            self._forget(slot)

    def _forget(self, slot: ModelSlot) -> None:
        """An unloading slot's engine is gone: unloaded."""
        slot.record = None
        slot.expires_at = slot.written_expiry = None
        self._lock.transition(slot, LoadState.UNLOADING, LoadState.UNLOADED)
        self._wake.set()

    def _engine_died(self, death: Death) -> str:
        """The reaper cleaned up after a dead engine: a slot it served is unloaded and the
        crash counted. What happens next, for the reaper's log line."""
        dead = death.record
        slot = next((s for s in self._slots.values() if s.record and s.record.id == dead.id), None)
        if slot is not None and self._lock.transition(slot, LoadState.LOADED, LoadState.UNLOADING):
            self._forget(slot)
            return self._crashes.crashed(slot.name, death)
        if (named := self._by_name.get(dead.handle.spec.served_name)) is not None:
            return f"the next request for {named.name} loads it on demand"
        return f"nothing starts it again (`gomgr start {dead.handle.spec.repo}` does)"

    async def _admit(self, slot: ModelSlot) -> None:
        """Wait until `slot`'s model fits: under the loaded-models cap and in the free memory
        of a device, unloading idle models least recently used first; LoadFailed with the
        numbers where it cannot fit even with every model the supervisor loaded unloaded."""
        if slot.footprint is None:
            slot.footprint = await asyncio.to_thread(store_footprint, self._store, slot.repo)
        cap, waited_s = self._settings.max_loaded, self._settings.start_timeout_s
        deadline = time.monotonic() + waited_s
        while True:
            devices = await asyncio.to_thread(self._memory.devices)
            # NOTE: no await from the verdict to `admitted`: admissions are serial, each one
            # counting those admitted before it.
            verdict = judge(slot, list(self._slots.values()), devices, self._registry, cap)
            if verdict.admitted:
                slot.gpu, slot.admitted = verdict.gpu, True
                return
            if (victim := verdict.victim) is not None:
                self._begin_unload(victim)
                assert victim.task is not None
                await asyncio.shield(victim.task)
                continue
            if time.monotonic() > deadline:
                raise LoadFailed(waited_too_long(slot, verdict, cap, waited_s))
            await asyncio.sleep(ADMIT_POLL_S)

    # -- keep-alive ----------------------------------------------------------------------

    def _set_expiry(self, slot: ModelSlot) -> None:
        keep = slot.keep_alive_s
        slot.expires_at = None if keep < 0 else time.time() + keep
        with self._lock:
            if slot.state is not LoadState.LOADED or slot.record is None:
                return
            old, new = slot.written_expiry, slot.expires_at
            if old is not None and new is not None and abs(new - old) <= EXPIRY_WRITE_SLACK_S:
                return
            slot.record = write_expiry(slot.record, new, self._paths)
            slot.written_expiry = new

    async def _reap(self) -> None:
        scanned = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), REAP_TICK_S)
            self._wake.clear()
            now = time.time()
            for slot in unload_candidates(list(self._slots.values()), self._registry):
                if slot.expires_at is not None and slot.expires_at <= now:
                    self._begin_unload(slot)
            if time.monotonic() - scanned > STORE_RESCAN_S:
                self._refresh(await asyncio.to_thread(offered_models, self._store, self._desired))
                scanned = time.monotonic()

    # -- the catalog ---------------------------------------------------------------------

    def desire(self, desired: DesiredState) -> None:
        """`gomgr apply` handed over its desired state: its entries join the catalog."""
        self._desired = desired
        self._refresh(offered_models(self._store, desired))

    def _refresh(self, models: list[StoreModel]) -> None:
        self._slots = follow(self._slots, models, self._settings.keep_alive_s)
        self._by_name = {name: s for s in self._slots.values() for name in s.names()}

    def _entry(self, slot: ModelSlot) -> CatalogEntry:
        state, expires = slot.state, slot.expires_at
        if state is LoadState.UNLOADED and self._pinned(slot):
            state = LoadState.LOADED
        if slot.state is not LoadState.LOADED:
            expires = None
        return CatalogEntry(
            name=slot.name, aliases=slot.aliases, state=state, size_bytes=slot.size_bytes,
            expires_at=expires, created=slot.created,
        )

    def _pinned(self, slot: ModelSlot) -> bool:
        return self._registry.serves_ready(slot.names())

    def _adopt(self, record: EngineRecord) -> None:
        """An engine that runs as this supervisor starts: one a previous supervisor loaded goes
        back into its slot, any other is routed as started by hand (pinned)."""
        if loaded_on_demand(record) and self._take(record) is None:
            return
        spec = record.handle.spec
        self._registry.register(Backend(
            id=spec.id, model=spec.served_name, base_url=spec.base_url, aliases=spec.aliases,
            created=int(record.handle.started_at), api_key=spec.api_key,
        ))

    def keep_alive_for(self, record: EngineRecord, keep_alive_s: float) -> bool:
        """An engine `gomgr start --keep-alive` ran (registered already): the supervisor's to
        unload once idle that long. False where no unloaded store model has its name."""
        slot = self._take(record)
        if slot is not None:
            slot.keep_alive_s = slot.default_keep_alive_s = keep_alive_s
            self._set_expiry(slot)
        return slot is not None

    async def unload_engine(self, engine_id: str) -> bool:
        """`gomgr stop` of an engine this supervisor loaded: unloaded through its slot (True);
        False for any other engine, which the caller stops itself."""
        slot = next((s for s in self._slots.values() if s.record and s.record.id == engine_id), None)
        if slot is None:
            return False
        self._begin_unload(slot)
        if slot.state is LoadState.UNLOADING and slot.task is not None:
            await asyncio.shield(slot.task)
        return True

    def _take(self, record: EngineRecord) -> ModelSlot | None:
        """The unloaded slot of `record`'s model, now loaded with it; None if there is none."""
        slot = self._slots.get(record.handle.spec.served_name)
        if slot is None or not self._lock.transition(slot, LoadState.UNLOADED, LoadState.LOADING):
            return None
        slot.record, slot.admitted, slot.last_used = record, True, time.monotonic()
        self._lock.transition(slot, LoadState.LOADING, LoadState.LOADED)
        self._set_expiry(slot)
        return slot

    def _task(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=name)
        # NOTE: retrieved, so a load whose every waiter left does not log "never retrieved".
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task
