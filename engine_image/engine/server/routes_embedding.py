"""Embedding and score routes: native ``/encode``, OpenAI ``/v1/embeddings``, ``/v1/score``."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict

from engine.core.errors import InvalidRequest
from engine.ipc.messages import ClassifyRequest, EmbedRequest
from engine.server.context import ServerContext
from engine.server.http_errors import bad_request, json_response, parse_json_body
from engine.server.model_kind_guard import KIND_DESCRIPTIONS, model_kind
from engine.server.openai.serving_embedding import (
    EmbeddingRequest,
    create_embedding,
    embedding_inputs,
)
from engine.server.serving_score import ScoreBody, score


class EncodeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str | list[str] | None = None
    input_ids: list[int] | list[list[int]] | None = None
    rid: str | None = None


def embedding_router(ctx: ServerContext) -> APIRouter:
    router = APIRouter()
    kind = model_kind(ctx.hf_config.get("architectures") or [], ctx.is_embedding)

    def require_embedding_model() -> None:
        if not ctx.is_embedding:
            raise bad_request(
                "this model is a generation model: embeddings need an embedding model "
                "(start the engine with --is-embedding)"
            )

    @router.api_route("/encode", methods=["POST", "PUT"])
    async def encode(request: Request) -> Response:
        require_embedding_model()
        return await answer_encode_body(ctx, await parse_json_body(request, EncodeBody), EmbedRequest)

    @router.post("/v1/embeddings")
    async def embeddings(request: Request) -> Response:
        require_embedding_model()
        body = await parse_json_body(request, EmbeddingRequest)
        try:
            return await create_embedding(ctx, body)
        except InvalidRequest as err:
            raise bad_request(str(err)) from None

    @router.post("/v1/score")
    async def score_route(request: Request) -> Response:
        if kind != "generation":
            raise bad_request(f"{KIND_DESCRIPTIONS[kind]}: /v1/score needs a generation model")
        try:
            return await score(ctx, await parse_json_body(request, ScoreBody))
        except InvalidRequest as err:
            raise bad_request(str(err)) from None

    return router


async def answer_encode_body(
    ctx: ServerContext, body: EncodeBody, message: type[EmbedRequest | ClassifyRequest]
) -> Response:
    """``/encode``'s answer (also ``/classify``'s): one ``{"embedding", "meta_info"}`` per
    prompt, a list when the body gave a list; ``embedding`` is whatever the forward returns
    per prompt (pooled vector, or a classifier's raw logits)."""
    if (body.text is None) == (body.input_ids is None):
        raise bad_request("give exactly one of text or input_ids")
    given = body.text if body.text is not None else body.input_ids
    assert given is not None
    prompts = embedding_inputs(ctx, given)
    rid = body.rid or uuid.uuid4().hex
    try:
        output = await ctx.tokenizer_manager.forward_only(message(rid, prompts))
    except InvalidRequest as err:
        raise bad_request(str(err)) from None
    results = [
        {"embedding": values, "meta_info": {"id": rid, "prompt_tokens": len(ids)}}
        for values, ids in zip(output.values, prompts)
    ]
    batched = isinstance(body.text, list) or bool(body.input_ids and isinstance(body.input_ids[0], list))
    return json_response(results if batched else results[0])
