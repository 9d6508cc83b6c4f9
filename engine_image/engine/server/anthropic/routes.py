"""Anthropic routes; every error on them is answered in Anthropic's shape."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from engine.server.anthropic.errors import error_response
from engine.server.anthropic.protocol import CountTokensRequest, MessagesRequest
from engine.server.anthropic.serving_messages import count_tokens, create_message
from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, parse_json_body


def anthropic_router(ctx: ServerContext) -> APIRouter:
    # NOTE: the anthropic-version and x-api-key headers are accepted and not needed here.
    router = APIRouter()

    @router.post("/v1/messages")
    async def messages(request: Request) -> Response:
        try:
            return await create_message(ctx, await parse_json_body(request, MessagesRequest))
        except ApiError as err:
            return error_response(err)

    @router.post("/v1/messages/count_tokens")
    async def messages_count_tokens(request: Request) -> Response:
        try:
            return count_tokens(ctx, await parse_json_body(request, CountTokensRequest))
        except ApiError as err:
            return error_response(err)

    return router
