"""`gomgr stop`: deregister, end the engine (SIGTERM, bounded wait, SIGKILL), remove the record."""

from __future__ import annotations

from manager.lifecycle.errors import EngineNotFound
from manager.lifecycle.reconcile import reconcile
from manager.lifecycle.router_link import RouterLink
from manager.runtimes.registry import get_runtime
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore, StateConflict


def find_engines(records: list[EngineRecord], target: str) -> list[EngineRecord]:
    """The engine with id `target`, else every engine serving `target` (name or alias)."""
    by_id = [r for r in records if r.id == target]
    if by_id:
        return by_id
    return [r for r in records if target in (r.handle.spec.served_name, *r.handle.spec.aliases)]


def stop_engines(paths: StatePaths, target: str | None) -> list[EngineRecord]:
    """Stop the engines `target` names, or every engine when it is None; the ones stopped."""
    router = RouterLink.from_paths(paths)
    live = list(reconcile(paths, router).live)
    chosen = live if target is None else find_engines(live, target)
    if target is not None and not chosen:
        raise EngineNotFound(f"no running engine has the id or served name '{target}' (see gomgr ps)")
    for record in chosen:
        stop_record(record, paths, router)
    return chosen


def stop_record(record: EngineRecord, paths: StatePaths, router: RouterLink) -> None:
    """Deregister one engine, end it and remove its record and log; nothing when another
    writer (a stop, the supervisor's reaper) took the engine first."""
    records = RecordStore(paths)
    try:
        record = records.set_state(record, EngineState.STOPPING)
    except StateConflict:
        return
    router.deregister(record.id)
    get_runtime(record.handle.runtime, paths).stop(record.handle)
    records.remove(record.id, keep_log=False)
