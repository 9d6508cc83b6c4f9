"""Run a piece of ASGI response work, cancelling it the moment the client goes away."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from starlette.types import Receive


async def until_disconnect(receive: Receive, work: Callable[[], Awaitable[None]]) -> bool:
    """Run ``work``; cancel it if ``http.disconnect`` arrives first. True if the client left.

    NOTE: uvicorn drops sends after a disconnect without raising, so a stream that only
    writes would never notice; watching ``receive`` is what closes the upstream request
    (and so aborts the engine's generation) while it is still waiting for tokens.
    """
    left = False

    async def watch(scope: anyio.CancelScope) -> None:
        nonlocal left
        while (await receive())["type"] != "http.disconnect":
            pass
        left = True
        scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch, tg.cancel_scope)
        await work()
        tg.cancel_scope.cancel()
    return left
