"""Cross-encoder rerank: one (query, document) pair per document through the classification head.

``/v1/rerank`` answers SGLang's shape (docs/engine-api.md): a list of ``{"score", "document",
"index", "meta_info"}``. ``/v2/rerank`` answers the Cohere / Jina / vLLM shape:
``{"id", "model", "results": [{"index", "relevance_score", "document": {"text"}}], "usage"}``.
Both are sorted by score, highest first, and cut to ``top_n``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from engine.config.classification import num_labels, relevance_activation
from engine.ipc.messages import ClassifyRequest
from engine.server.context import ServerContext
from engine.server.http_errors import bad_request, json_response


class RerankBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    query: str
    documents: list[str]
    top_n: int | None = Field(default=None, ge=1)
    return_documents: bool = True


@dataclass(frozen=True)
class _Ranked:
    index: int
    score: float
    prompt_tokens: int


async def _rank(ctx: ServerContext, body: RerankBody, rid: str) -> tuple[list[_Ranked], int]:
    """The documents' relevance scores, best first and cut to top_n; and the prompt tokens."""
    if not body.query.strip():
        raise bad_request("query must not be empty", param="query")
    if not body.documents:
        raise bad_request("documents must not be empty", param="documents")
    if any(not doc.strip() for doc in body.documents):
        raise bad_request("each document must be a non-empty string", param="documents")
    labels = num_labels(ctx.hf_config)
    if labels != 1:
        raise bad_request(f"this model has {labels} labels: rerank needs a cross-encoder with one relevance logit")
    try:
        activation = relevance_activation(ctx.hf_config)
    except ValueError as err:
        raise bad_request(str(err)) from None
    # NOTE: pairs longer than the model takes are truncated, longest side first, as
    # sentence-transformers' CrossEncoder does; query then document, as the model was trained.
    encoded = ctx.tokenizer.encode_pairs([body.query] * len(body.documents), body.documents, ctx.context_length)
    input_ids = encoded.input_ids
    token_types = encoded.token_type_ids
    output = await ctx.tokenizer_manager.forward_only(ClassifyRequest(rid, input_ids, token_types))
    ranked = sorted(
        (_Ranked(i, activation(logits[0]), len(input_ids[i])) for i, logits in enumerate(output.values)),
        key=lambda r: r.score,
        reverse=True,
    )
    return ranked[: body.top_n], output.prompt_tokens


async def rerank_sglang(ctx: ServerContext, body: RerankBody) -> Response:
    rid = uuid.uuid4().hex
    ranked, _ = await _rank(ctx, body, rid)
    results: list[dict[str, Any]] = []
    for r in ranked:
        item: dict[str, Any] = {"score": r.score, "index": r.index}
        if body.return_documents:
            item["document"] = body.documents[r.index]
        item["meta_info"] = {"id": rid, "prompt_tokens": r.prompt_tokens}
        results.append(item)
    return json_response(results)


async def rerank_cohere(ctx: ServerContext, body: RerankBody) -> Response:
    rid = uuid.uuid4().hex
    ranked, prompt_tokens = await _rank(ctx, body, rid)
    results: list[dict[str, Any]] = []
    for r in ranked:
        item: dict[str, Any] = {"index": r.index, "relevance_score": r.score}
        if body.return_documents:
            item["document"] = {"text": body.documents[r.index]}
        results.append(item)
    return json_response(
        {"id": f"rerank-{rid}", "model": ctx.args.model_name, "results": results, "usage": {"total_tokens": prompt_tokens}}
    )
