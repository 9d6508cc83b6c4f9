"""Routes of sequence-classification models: ``/v1/rerank``, ``/v2/rerank``, ``/classify``, ``/v1/classify``.

Any other kind of model answers these with a 400 that says what it is and what it serves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel

from engine.core.errors import InvalidRequest
from engine.server.context import ServerContext
from engine.server.http_errors import bad_request, parse_json_body
from engine.server.model_kind_guard import KIND_DESCRIPTIONS, ModelKind, model_kind
from engine.server.routes_embedding import EncodeBody
from engine.server.serving_classify import OpenAIClassifyBody, classify_native, classify_openai
from engine.server.serving_rerank import RerankBody, rerank_cohere, rerank_sglang

Body = TypeVar("Body", bound=BaseModel)

_RERANK_NEEDS = "reranking needs a cross-encoder (BertForSequenceClassification, XLMRobertaForSequenceClassification)"
_CLASSIFY_NEEDS = "classification needs a sequence-classification model (a cross-encoder or a reward model)"


def classification_router(ctx: ServerContext) -> APIRouter:
    router = APIRouter()
    kind = model_kind(ctx.hf_config.get("architectures") or [], ctx.is_embedding)

    async def serve(
        request: Request,
        allowed: tuple[ModelKind, ...],
        needs: str,
        model: type[Body],
        handler: Callable[[ServerContext, Body], Awaitable[Response]],
    ) -> Response:
        if kind not in allowed:
            raise bad_request(f"{KIND_DESCRIPTIONS[kind]}: {needs}")
        body = await parse_json_body(request, model)
        try:
            return await handler(ctx, body)
        except InvalidRequest as err:
            raise bad_request(str(err)) from None

    @router.post("/v1/rerank")
    async def rerank_v1(request: Request) -> Response:
        return await serve(request, ("cross-encoder",), _RERANK_NEEDS, RerankBody, rerank_sglang)

    @router.post("/v2/rerank")
    async def rerank_v2(request: Request) -> Response:
        return await serve(request, ("cross-encoder",), _RERANK_NEEDS, RerankBody, rerank_cohere)

    @router.api_route("/classify", methods=["POST", "PUT"])
    async def classify(request: Request) -> Response:
        return await serve(request, ("cross-encoder", "reward"), _CLASSIFY_NEEDS, EncodeBody, classify_native)

    @router.post("/v1/classify")
    async def classify_v1(request: Request) -> Response:
        return await serve(request, ("cross-encoder", "reward"), _CLASSIFY_NEEDS, OpenAIClassifyBody, classify_openai)

    return router
