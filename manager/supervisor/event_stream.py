"""Work run in a worker thread of the supervisor, its progress streamed to the client as it
happens (one JSON event a line), its end as the last event; a client that goes away sets the
work's `cancelled`, and the work undoes what it began (the engine API's starts and applies).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, TypeVar

from manager.lifecycle.errors import LifecycleError, StartCancelled
from manager.models.errors import ModelError
from manager.supervisor.engine_messages import (
    ENGINE_EVENT,
    NDJSON,
    AnnounceEvent,
    EngineEvent,
    FailedEvent,
    StepEvent,
    TransferredEvent,
)

# NOTE (issue 30): starlette and asyncio are imported where a stream is made, so a booting
# supervisor begins the start handed to it (manager/supervisor/boot_start.py) before the
# web stack.
if TYPE_CHECKING:
    import asyncio

    from starlette.responses import StreamingResponse

logger = logging.getLogger(__name__)

Emit = Callable[[EngineEvent], None]
Cancelled = Callable[[], bool]
Result = TypeVar("Result")


class EmittingProgress:
    """Progress as events; the next step after a cancel raises StartCancelled."""

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


def announcer(emit: Emit) -> Callable[[str], None]:
    return lambda line: emit(AnnounceEvent(text=line))


def stream_events(
    work: Callable[[Emit, Cancelled], Result], finish: Callable[[Result, Emit], EngineEvent]
) -> StreamingResponse:
    """`work` in a worker thread; `finish` turns its result into the last event, in the event
    loop (so it may change the supervisor's state). A LifecycleError or ModelError from
    `work` ends the stream with a `failed` event instead."""
    from starlette.responses import StreamingResponse

    return StreamingResponse(_stream(work, finish), media_type=NDJSON)


async def _stream(
    work: Callable[[Emit, Cancelled], Result], finish: Callable[[Result, Emit], EngineEvent]
) -> AsyncIterator[bytes]:
    import asyncio

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[EngineEvent] = asyncio.Queue()
    cancel = threading.Event()

    def emit(event: EngineEvent) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, event)

    job = asyncio.ensure_future(asyncio.to_thread(work, emit, cancel.is_set))
    # NOTE: retrieved, so work whose client left logs its end once, not "never retrieved".
    job.add_done_callback(lambda done: done.cancelled() or done.exception())
    try:
        while not job.done() or not queue.empty():
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, job}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield _line(getter.result())
            else:
                getter.cancel()
        # NOTE: `finish` runs here, in the loop, so what it says goes straight to the queue.
        final = _final(job, finish, queue.put_nowait)
        while not queue.empty():
            yield _line(queue.get_nowait())
        yield _line(final)
    finally:
        # NOTE: reached on a client's disconnect too: the worker sees it and undoes its work.
        cancel.set()


def _final(
    job: asyncio.Future[Result], finish: Callable[[Result, Emit], EngineEvent], emit: Emit
) -> EngineEvent:
    try:
        result = job.result()
    except LifecycleError as exc:
        return FailedEvent(message=exc.message, details=exc.details, exit_code=exc.exit_code)
    except ModelError as exc:
        return FailedEvent(message=exc.message, exit_code=1)
    except Exception as exc:
        logger.exception("work of the engine API failed unexpectedly")
        return FailedEvent(message=f"{type(exc).__name__}: {exc}", exit_code=1)
    return finish(result, emit)


def _line(event: EngineEvent) -> bytes:
    return ENGINE_EVENT.dump_json(event) + b"\n"
