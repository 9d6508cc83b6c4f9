"""POST /api/generate: a prompt (templated unless raw), then one generation."""

from __future__ import annotations

import time

from fastapi.responses import Response

from engine.server.chat.messages import ChatMessage
from engine.server.chat.template import chat_prompt_ids
from engine.server.context import ServerContext
from engine.server.http_errors import bad_request
from engine.server.ollama.protocol import (
    Done,
    GenerateReply,
    GenerateRequest,
    done_fields,
    encode_json,
    timestamp,
)
from engine.server.ollama.serving import (
    TimedGeneration,
    check_model,
    refuse_unavailable,
    respond,
    sampling_params,
)


def _refuse_unavailable(ctx: ServerContext, body: GenerateRequest) -> None:
    refuse_unavailable(ctx, body.think)
    if body.template:
        raise bad_request("template is not supported; the model's own chat template is used")
    if body.suffix:
        raise bad_request(f"'{ctx.args.model_name}' does not support insert")
    if body.images:
        raise bad_request(f"'{ctx.args.model_name}' does not support images")


def prompt_ids(ctx: ServerContext, body: GenerateRequest) -> list[int]:
    """``context`` (ids from an earlier reply), then the prompt: raw, or through the chat template.

    A model without a chat template gets the prompt as is, like Ollama's default ``{{ .Prompt }}``.
    """
    history = body.context or []
    vocab = len(ctx.tokenizer)
    if any(not 0 <= token < vocab for token in history):
        raise bad_request(f"context must hold token ids in [0, {vocab})")
    if body.raw or ctx.tokenizer.chat_template is None:
        ids: list[int] = ctx.tokenizer.encode(body.prompt, add_special_tokens=not history)
        return history + ids
    system = [ChatMessage(role="system", content=body.system)] if body.system else []
    return history + chat_prompt_ids(
        ctx.tokenizer, [*system, ChatMessage(role="user", content=body.prompt)]
    )


async def generate(ctx: ServerContext, body: GenerateRequest) -> Response:
    started_ns = time.perf_counter_ns()
    check_model(ctx, body.model)
    _refuse_unavailable(ctx, body)
    if not body.prompt:
        # NOTE: Ollama's documented "load a model" call; the engine's model is always loaded.
        loaded = GenerateReply(
            model=body.model, created_at=timestamp(), response="", done=True, done_reason="load"
        )
        return Response(encode_json(loaded), media_type="application/json")
    ids = prompt_ids(ctx, body)
    generation = TimedGeneration(
        ctx, ids, sampling_params(ctx, body.options, ids, body.format), started_ns
    )

    def render(text: str, done: Done | None) -> GenerateReply:
        # NOTE: the final reply's context lets a client continue the conversation (not in raw mode).
        context = None
        if done is not None and not body.raw and generation.sample is not None:
            context = generation.ids + generation.sample.token_ids
        return GenerateReply(
            model=body.model,
            created_at=timestamp(),
            response=text,
            context=context,
            **done_fields(done),
        )

    return await respond(generation, body.stream, render)
