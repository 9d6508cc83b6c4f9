"""OpenAI ``/v1/embeddings``: input strings or token ids, float or base64 vectors, usage."""

from __future__ import annotations

import base64
import uuid
from typing import Any, Literal

import numpy as np
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from engine.ipc.messages import EmbedRequest
from engine.server.context import ServerContext
from engine.server.generation.prompt import check_prompt
from engine.server.http_errors import bad_request, json_response


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None


def embedding_inputs(ctx: ServerContext, given: str | list[str] | list[int] | list[list[int]]) -> list[list[int]]:
    """Token ids per input: a string, strings, one token list or token lists."""
    if given == "" or (isinstance(given, list) and "" in given):
        raise bad_request("input must not contain empty strings", param="input")
    if isinstance(given, str):
        prompts = [ctx.tokenizer.encode(given)]
    elif not given:
        raise bad_request("input must not be empty", param="input")
    elif isinstance(given[0], str):
        prompts = [ctx.tokenizer.encode(text) for text in given]
    elif isinstance(given[0], int):
        prompts = [list(given)]
    else:
        prompts = [list(ids) for ids in given]
    for ids in prompts:
        if not ids:
            raise bad_request("an input is empty", param="input")
        check_prompt(ctx, ids)
    return prompts


def supported_dimensions(ctx: ServerContext, dimensions: int) -> None:
    """Refuses ``dimensions`` unless it is the model's own size or a Matryoshka size it names."""
    native = int(ctx.hf_config.get("hidden_size", 0))
    allowed = ctx.hf_config.get("matryoshka_dimensions") or []
    if dimensions == native or dimensions in allowed or (ctx.hf_config.get("is_matryoshka") and dimensions < native):
        return
    raise bad_request(
        f"this model does not support dimensions={dimensions}: its embeddings have {native} dimensions",
        param="dimensions",
    )


def shorten(vectors: np.ndarray, dimensions: int | None) -> np.ndarray:
    """Matryoshka truncation to ``dimensions``, then L2 normalisation again."""
    if dimensions is None or dimensions >= vectors.shape[1]:
        return vectors
    cut = vectors[:, :dimensions]
    normalised: np.ndarray = cut / np.maximum(np.linalg.norm(cut, axis=1, keepdims=True), 1e-12)
    return normalised


async def create_embedding(ctx: ServerContext, body: EmbeddingRequest) -> Response:
    prompts = embedding_inputs(ctx, body.input)
    if body.dimensions is not None:
        supported_dimensions(ctx, body.dimensions)
    output = await ctx.tokenizer_manager.forward_only(EmbedRequest(uuid.uuid4().hex, prompts))
    vectors = shorten(np.asarray(output.values, dtype=np.float32), body.dimensions)
    data: list[dict[str, Any]] = [
        {"object": "embedding", "index": i, "embedding": _encode(row, body.encoding_format)}
        for i, row in enumerate(vectors)
    ]
    usage = {"prompt_tokens": output.prompt_tokens, "total_tokens": output.prompt_tokens}
    return json_response({"object": "list", "data": data, "model": ctx.args.model_name, "usage": usage})


def _encode(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        # NOTE: OpenAI's base64 is the little-endian float32 bytes of the vector.
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    values: list[float] = vector.tolist()
    return values
