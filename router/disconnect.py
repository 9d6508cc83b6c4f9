"""Run a piece of ASGI response work, cancelling it the moment the client goes away."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.types import Receive


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def until_disconnect(receive: Receive, work: Callable[[], Awaitable[None]]) -> None:
    """Run ``work``; cancel it if ``http.disconnect`` arrives first.

    NOTE: uvicorn drops sends after a disconnect without raising, so a stream that only
    writes would never notice; watching ``receive`` is what closes the upstream request
    (and so aborts the engine's generation) while it is still waiting for tokens. The watch
    is one plain task that cancels this one: cheaper per request than an anyio task group.
    """
    task = asyncio.current_task()
    assert task is not None
    left = False
    finished = False

    def on_disconnect(watcher: asyncio.Task[None]) -> None:
        nonlocal left
        # NOTE: uvicorn also answers "disconnect" once the response is complete; by then
        # `finished` is set and the work must not be cancelled.
        if not finished and not watcher.cancelled() and watcher.exception() is None:
            left = True
            task.cancel()

    watcher = asyncio.create_task(_disconnected(receive))
    watcher.add_done_callback(on_disconnect)
    try:
        await work()
    except asyncio.CancelledError:
        if not left or task.uncancel() > 0:
            raise
    finally:
        finished = True
        watcher.cancel()
