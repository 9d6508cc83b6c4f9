"""The supervisor's engine API: `gomgr start`, `restart` and `stop` run here, in the one owner
of engine state, and the CLI is its client (manager/supervisor/engine_client.py).

    POST   /admin/engines                  StartBody   → a stream of engine events (NDJSON)
    POST   /admin/engines/{target}/restart RestartBody → the same
    POST   /admin/boot-start                           → the same, of the start handed over at
                                                         boot (manager/supervisor/boot_start.py)
    DELETE /admin/engines/{target}                     → StoppedOut
    DELETE /admin/engines                              → StoppedOut (every engine)

`target` is an engine id or a served name, which may hold a slash (org/name).

A start runs `start_engine` in a worker thread, its progress streamed as it happens; a
client that goes away (Ctrl-C) cancels it, and the start undoes what it began. The routes sit
behind the router's admin token (router/admin.py mounts them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fastapi import APIRouter
from starlette.responses import StreamingResponse

from manager.lifecycle.reconcile import reconcile
from manager.lifecycle.restart import restart_engine
from manager.lifecycle.router_link import RouterLink
from manager.lifecycle.start import start_engine
from manager.lifecycle.start_request import Started
from manager.lifecycle.stop import find_engines, stop_record
from manager.state.paths import StatePaths
from manager.supervisor.boot_start import BootStart
from manager.supervisor.engine_messages import (
    ENGINE_NOT_FOUND,
    AnnounceEvent,
    EngineEvent,
    RestartBody,
    StartBody,
    StartedEvent,
    StoppedEngine,
    StoppedOut,
)
from manager.supervisor.engines import requested_start
from manager.supervisor.event_stream import (
    Cancelled,
    Emit,
    EmittingProgress,
    announcer,
    stream_events,
)
from manager.supervisor.supervisor import Supervisor
from router.errors import RouterError


def engine_routes(supervisor: Supervisor, paths: StatePaths, boot: BootStart | None = None) -> APIRouter:
    """The engine API; `boot`: the start handed over at the supervisor's boot, to follow."""
    routes = APIRouter()

    @routes.post("/engines")
    async def start(body: StartBody) -> StreamingResponse:
        request, keep_alive_s = requested_start(body)

        def work(emit: Emit, cancelled: Cancelled) -> Started:
            announce = announcer(emit)
            return start_engine(request, paths, EmittingProgress(emit, cancelled), announce, cancelled)

        return stream_events(work, _finish_start(supervisor, keep_alive_s))

    @routes.post("/boot-start")
    async def follow_boot_start() -> StreamingResponse:
        if boot is None or not boot.claim():
            raise RouterError(
                404, "no start was handed to this supervisor as it booted, or it is followed already",
                code=ENGINE_NOT_FOUND,
            )
        return stream_events(boot.follow, _finish_start(supervisor, boot.keep_alive_s))

    @routes.post("/engines/{target:path}/restart")
    async def restart(target: str, body: RestartBody) -> StreamingResponse:
        def work(emit: Emit, cancelled: Cancelled) -> Started:
            return restart_engine(
                paths, target, EmittingProgress(emit, cancelled), announcer(emit), body.timeout_s,
                cancelled,
            )

        return stream_events(work, _started)

    @routes.delete("/engines/{target:path}")
    async def stop_one(target: str) -> StoppedOut:
        return await _stop(supervisor, paths, target)

    @routes.delete("/engines")
    async def stop_all() -> StoppedOut:
        return await _stop(supervisor, paths, None)

    return routes


async def _stop(supervisor: Supervisor, paths: StatePaths, target: str | None) -> StoppedOut:
    link = RouterLink.from_paths(paths)
    live = list((await asyncio.to_thread(reconcile, paths, link)).live)
    chosen = live if target is None else find_engines(live, target)
    if target is not None and not chosen:
        raise RouterError(
            404, f"no running engine has the id or served name '{target}' (see gomgr ps)",
            code=ENGINE_NOT_FOUND, param="target",
        )
    for record in chosen:
        # NOTE: one the supervisor loaded is unloaded through its slot, so the slot follows.
        if not await supervisor.unload_engine(record.id):
            await asyncio.to_thread(stop_record, record, paths, link)
    return StoppedOut(stopped=tuple(StoppedEngine.of(r) for r in chosen))


def _finish_start(
    supervisor: Supervisor, keep_alive_s: float | None
) -> Callable[[Started, Emit], EngineEvent]:
    """A start's last event; an engine started with a keep-alive becomes the supervisor's to
    unload once idle that long."""

    def finish(started: Started, emit: Emit) -> EngineEvent:
        if keep_alive_s is not None and not supervisor.keep_alive_for(started.record, keep_alive_s):
            emit(AnnounceEvent(
                text=f"keep-alive not applied: {started.record.handle.spec.served_name} is not "
                "a model of the store (import it with `gomgr models pull DIR --name`); the "
                "engine runs until stopped",
            ))
        return _started(started, emit)

    return finish


def _started(started: Started, _emit: Emit) -> EngineEvent:
    return StartedEvent(
        engine_id=started.record.id, router_url=started.router_url,
        runtime_reason=started.runtime_reason,
    )
