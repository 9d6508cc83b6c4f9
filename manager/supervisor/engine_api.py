"""The supervisor's engine API: `gomgr start`, `restart` and `stop` run here, in the one owner
of engine state, and the CLI is its client (manager/supervisor/engine_client.py).

    POST   /admin/engines                  StartBody   → a stream of engine events (NDJSON)
    POST   /admin/engines/{target}/restart RestartBody → the same
    DELETE /admin/engines/{target}                     → StoppedOut
    DELETE /admin/engines                              → StoppedOut (every engine)

`target` is an engine id or a served name, which may hold a slash (org/name).

A start runs `start_engine` in a worker thread, its progress streamed as it happens; a
client that goes away (Ctrl-C) cancels it, and the start undoes what it began. The routes sit
behind the router's admin token (router/admin.py mounts them).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable

from fastapi import APIRouter
from starlette.responses import StreamingResponse

from manager.lifecycle.errors import LifecycleError, StartCancelled
from manager.lifecycle.reconcile import reconcile
from manager.lifecycle.restart import restart_engine
from manager.lifecycle.router_link import RouterLink
from manager.lifecycle.start import Started, StartRequest, start_engine
from manager.lifecycle.stop import find_engines, stop_record
from manager.models.errors import ModelError
from manager.state.paths import StatePaths
from manager.supervisor.engine_messages import (
    ENGINE_EVENT,
    ENGINE_NOT_FOUND,
    NDJSON,
    AnnounceEvent,
    EngineEvent,
    FailedEvent,
    RestartBody,
    StartBody,
    StartedEvent,
    StepEvent,
    StoppedEngine,
    StoppedOut,
    TransferredEvent,
)
from manager.supervisor.engines import ON_DEMAND_LABEL
from manager.supervisor.supervisor import Supervisor
from router.errors import RouterError
from router.keep_alive import parse_keep_alive

logger = logging.getLogger(__name__)

Emit = Callable[[EngineEvent], None]
Cancelled = Callable[[], bool]


class EmittingProgress:
    """A start's progress as events; the next step after a cancel raises StartCancelled."""

    def __init__(self, emit: Emit, cancelled: Cancelled) -> None:
        self._emit = emit
        self._cancelled = cancelled

    def step(self, description: str) -> None:
        self._check()
        self._emit(StepEvent(text=description))

    def transferred(self, done: int, total: int) -> None:
        self._check()
        self._emit(TransferredEvent(done=done, total=total))

    def _check(self) -> None:
        if self._cancelled():
            raise StartCancelled("the start was cancelled")


def engine_routes(supervisor: Supervisor, paths: StatePaths) -> APIRouter:
    routes = APIRouter()

    @routes.post("/engines")
    async def start(body: StartBody) -> StreamingResponse:
        keep_alive_s = parse_keep_alive(body.keep_alive)
        labels = dict(body.labels)
        if keep_alive_s is not None:
            labels[ON_DEMAND_LABEL] = "1"
        request = StartRequest(
            repo=body.repo, runtime=body.runtime, port=body.port, served_name=body.served_name,
            timeout_s=body.timeout_s, gpus=body.gpus, aliases=body.aliases, variant=body.variant,
            labels=labels,
        )

        def work(emit: Emit, cancelled: Cancelled) -> Started:
            announce = _announcer(emit)
            return start_engine(request, paths, EmittingProgress(emit, cancelled), announce, cancelled)

        def after(started: Started, emit: Emit) -> None:
            if keep_alive_s is None:
                return
            if not supervisor.keep_alive_for(started.record, keep_alive_s):
                emit(AnnounceEvent(
                    text=f"keep-alive not applied: {started.record.handle.spec.served_name} is not "
                    "a model of the store (import it with `gomgr models pull DIR --name`); the "
                    "engine runs until stopped",
                ))

        return _events(work, after)

    @routes.post("/engines/{target:path}/restart")
    async def restart(target: str, body: RestartBody) -> StreamingResponse:
        def work(emit: Emit, cancelled: Cancelled) -> Started:
            return restart_engine(
                paths, target, EmittingProgress(emit, cancelled), _announcer(emit), body.timeout_s,
                cancelled,
            )

        return _events(work, lambda _started, _emit: None)

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


def _announcer(emit: Emit) -> Callable[[str], None]:
    return lambda line: emit(AnnounceEvent(text=line))


def _events(
    work: Callable[[Emit, Cancelled], Started], after: Callable[[Started, Emit], None]
) -> StreamingResponse:
    return StreamingResponse(_stream(work, after), media_type=NDJSON)


async def _stream(
    work: Callable[[Emit, Cancelled], Started], after: Callable[[Started, Emit], None]
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[EngineEvent] = asyncio.Queue()
    cancel = threading.Event()

    def emit(event: EngineEvent) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, event)

    job = asyncio.ensure_future(asyncio.to_thread(work, emit, cancel.is_set))
    # NOTE: retrieved, so a start whose client left logs its end once, not "never retrieved".
    job.add_done_callback(lambda done: done.cancelled() or done.exception())
    try:
        while not job.done() or not queue.empty():
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, job}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield _line(getter.result())
            else:
                getter.cancel()
        # NOTE: `after` runs here, in the loop, so what it says goes straight to the queue.
        final = _final(job, after, queue.put_nowait)
        while not queue.empty():
            yield _line(queue.get_nowait())
        yield _line(final)
    finally:
        # NOTE: reached on a client's disconnect too: the worker sees it and undoes the start.
        cancel.set()


def _final(
    job: asyncio.Future[Started], after: Callable[[Started, Emit], None], emit: Emit
) -> EngineEvent:
    try:
        started = job.result()
    except LifecycleError as exc:
        return FailedEvent(message=exc.message, details=exc.details, exit_code=exc.exit_code)
    except ModelError as exc:
        return FailedEvent(message=exc.message, exit_code=1)
    except Exception as exc:
        logger.exception("a start through the engine API failed unexpectedly")
        return FailedEvent(message=f"{type(exc).__name__}: {exc}", exit_code=1)
    after(started, emit)
    return StartedEvent(
        engine_id=started.record.id, router_url=started.router_url,
        runtime_reason=started.runtime_reason,
    )


def _line(event: EngineEvent) -> bytes:
    return ENGINE_EVENT.dump_json(event) + b"\n"
