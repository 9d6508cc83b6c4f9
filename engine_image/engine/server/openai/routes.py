"""OpenAI routes: models, chat completions, completions."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import Response

from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, parse_json_body
from engine.server.openai.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    ModelCard,
    ModelList,
    encode_json,
)
from engine.server.openai.responses_protocol import ResponsesRequest
from engine.server.openai.serving_chat import create_chat_completion
from engine.server.openai.serving_completions import create_completion
from engine.server.openai.serving_responses import create_response


def openai_router(ctx: ServerContext) -> APIRouter:
    router = APIRouter()
    started = int(time.time())

    def card() -> ModelCard:
        return ModelCard(
            object="model",
            id=ctx.args.model_name,
            created=started,
            owned_by="gomgr",
            root=ctx.model_path,
            max_model_len=ctx.context_length,
        )

    @router.get("/v1/models")
    async def list_models() -> Response:
        return Response(encode_json(ModelList(object="list", data=[card()])), media_type="application/json")

    @router.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str) -> Response:
        if model_id != ctx.args.model_name:
            raise ApiError(
                404,
                f"The model '{model_id}' does not exist; this server serves '{ctx.args.model_name}'",
                type_="invalid_request_error",
                param="model",
                code="model_not_found",
            )
        return Response(encode_json(card()), media_type="application/json")

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await create_chat_completion(ctx, await parse_json_body(request, ChatCompletionRequest))

    @router.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await create_completion(ctx, await parse_json_body(request, CompletionRequest))

    @router.post("/v1/responses")
    async def responses(request: Request) -> Response:
        return await create_response(ctx, await parse_json_body(request, ResponsesRequest))

    return router
