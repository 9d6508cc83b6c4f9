"""Cancel a request's handler the moment its client goes away: every route, streamed or not.

NOTE (issue 22): the non-streamed handlers used to poll ``request.is_disconnected()`` only
after a whole second without output, so a request that kept generating never noticed its
client had left and held its slot and KV to the end. Here one task per request awaits
``http.disconnect`` on the server's ``receive`` once the body is read, and cancels the
handler: the ``finally`` of ``Generation.deltas`` (``engine.server.generation.service``)
then aborts the request in the scheduler, which frees its slot and KV at its next step.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

_DISCONNECT: Message = {"type": "http.disconnect"}


class ClientDisconnectMiddleware:
    """Pure ASGI (streamed responses pass through unbuffered); outermost of ours."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await _RequestWatch(scope, receive, send).run(self.app)


class _RequestWatch:
    """One request: its body passes through, then a watcher owns the server's ``receive``.

    NOTE: after the body, the app's own ``receive`` calls (Starlette's StreamingResponse
    listens for the disconnect too) wait on the watcher's event, so the server's
    ``receive`` has a single reader.
    """

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._scope = scope
        self._receive = receive
        self._send = send
        self._gone = asyncio.Event()
        self._body_read = False
        self._responded = False
        self._left = False
        self._watcher: asyncio.Task[None] | None = None
        task = asyncio.current_task()
        assert task is not None
        self._task = task

    async def run(self, app: ASGIApp) -> None:
        try:
            await app(self._scope, self.receive, self.send)
        except asyncio.CancelledError:
            # NOTE: swallowed only when it was ours (and no one else cancelled the task too).
            if not self._left or self._task.uncancel() > 0:
                raise
        finally:
            if self._watcher is not None:
                self._watcher.cancel()

    async def receive(self) -> Message:
        if self._body_read:
            await self._gone.wait()
            return _DISCONNECT
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self._body_read = True
            self._gone.set()
        elif not message.get("more_body", False):
            self._body_read = True
            self._watcher = asyncio.create_task(self._watch())
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            # NOTE: set before sending: uvicorn answers "disconnect" once the response is complete.
            self._responded = True
        await self._send(message)

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self._gone.set()
        if not self._responded:
            self._left = True
            logger.info(
                "client disconnected; cancelling %s %s", self._scope["method"], self._scope["path"]
            )
            self._task.cancel()
