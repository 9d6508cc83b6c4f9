"""A streamed reply of one generation, which aborts what is unfinished when the reply ends."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from engine.server.generation.service import Generation


class GenerationStream(StreamingResponse):
    """The reply's body streams the generation; the generation is aborted when the reply ends.

    NOTE: the body's ``Generation.deltas`` aborts on its own once it runs; this also covers a
    client that left before the first byte, when the body never ran at all.
    """

    def __init__(self, generation: Generation, body: AsyncIterator[bytes], media_type: str) -> None:
        super().__init__(body, media_type=media_type)
        self._generation = generation

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._generation.abort()
