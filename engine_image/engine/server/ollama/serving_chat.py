"""POST /api/chat: messages through the model's chat template, then one generation."""

from __future__ import annotations

import time

from fastapi import Request
from fastapi.responses import Response

from engine.server.context import ServerContext
from engine.server.http_errors import bad_request
from engine.server.ollama.protocol import (
    AssistantMessage,
    ChatReply,
    ChatRequest,
    Done,
    done_fields,
    encode_json,
    timestamp,
)
from engine.server.ollama.serving import (
    Generation,
    check_model,
    refuse_unavailable,
    respond,
    sampling_params,
)
from engine.server.openai.chat_template import chat_prompt_ids
from engine.server.openai.protocol import ChatMessage


def chat_reply(model: str, content: str, done: Done | None) -> ChatReply:
    message = AssistantMessage(role="assistant", content=content)
    return ChatReply(model=model, created_at=timestamp(), message=message, **done_fields(done))


async def chat(ctx: ServerContext, body: ChatRequest, request: Request) -> Response:
    started_ns = time.perf_counter_ns()
    check_model(ctx, body.model)
    refuse_unavailable(ctx, body.format, body.think)
    if body.tools:
        raise bad_request("tool calling is not enabled for this model")
    if not body.messages:
        # NOTE: Ollama's documented "load a model" call; the engine's model is always loaded.
        loaded = ChatReply(
            model=body.model,
            created_at=timestamp(),
            message=AssistantMessage(role="assistant", content=""),
            done=True,
            done_reason="load",
        )
        return Response(encode_json(loaded), media_type="application/json")
    if any(m.images for m in body.messages):
        raise bad_request(f"'{ctx.args.model_name}' does not support images")
    messages = [
        ChatMessage(role=m.role, content=m.content, tool_calls=m.tool_calls) for m in body.messages
    ]
    ids = chat_prompt_ids(ctx.tokenizer, messages)
    generation = Generation(ctx, ids, sampling_params(ctx, body.options, ids), started_ns)
    return await respond(
        generation, body.stream, lambda text, done: chat_reply(body.model, text, done), request
    )
