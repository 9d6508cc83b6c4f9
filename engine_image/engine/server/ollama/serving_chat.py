"""POST /api/chat: messages through the model's chat template, then one generation."""

from __future__ import annotations

import time

import orjson
from fastapi.responses import Response

from engine.server.chat.messages import ChatMessage
from engine.server.chat.output import ChatOutputParser, chat_output_parser
from engine.server.chat.template import chat_prompt_ids
from engine.server.chat.tool_calling import tool_calling
from engine.server.context import ServerContext
from engine.server.http_errors import bad_request
from engine.server.ollama.protocol import (
    AssistantMessage,
    ChatReply,
    ChatRequest,
    Done,
    FunctionCallReply,
    ToolCallReply,
    done_fields,
    encode_json,
    timestamp,
)
from engine.server.ollama.serving import (
    Render,
    TimedGeneration,
    check_model,
    refuse_unavailable,
    respond,
    sampling_params,
)


def chat_reply(
    model: str, content: str, done: Done | None, tool_calls: list[ToolCallReply] | None = None
) -> ChatReply:
    message = AssistantMessage(role="assistant", content=content, tool_calls=tool_calls)
    return ChatReply(model=model, created_at=timestamp(), message=message, **done_fields(done))


def tool_call_render(model: str, parser: ChatOutputParser) -> Render:
    """Replies whose text goes through the tool-call parser; calls come whole, in the last one.

    NOTE: Ollama sends each call complete (arguments as an object), never in fragments.
    """
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}

    def render(text: str, done: Done | None) -> ChatReply:
        out = parser.feed(text, final=done is not None)
        for delta in out.calls:
            if delta.name is not None:
                names[delta.index] = delta.name
            arguments[delta.index] = arguments.get(delta.index, "") + delta.arguments
        if done is None or not names:
            return chat_reply(model, out.content, done)
        calls = [
            ToolCallReply(
                function=FunctionCallReply(name=names[i], arguments=orjson.loads(arguments[i]))
            )
            for i in sorted(names)
        ]
        return chat_reply(model, out.content, done, calls)

    return render


async def chat(ctx: ServerContext, body: ChatRequest) -> Response:
    started_ns = time.perf_counter_ns()
    check_model(ctx, body.model)
    refuse_unavailable(ctx, body.think)
    calling = tool_calling(body.tools, "auto", ctx.args.tool_call_parser)
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
    ids = chat_prompt_ids(ctx.tokenizer, messages, None, calling.template_tools)
    generation = TimedGeneration(
        ctx, ids, sampling_params(ctx, body.options, ids, body.format), started_ns
    )
    parser = chat_output_parser(None, calling.detector, calling.names)
    render: Render = (
        (lambda text, done: chat_reply(body.model, text, done))
        if parser is None
        else tool_call_render(body.model, parser)
    )
    return await respond(generation, body.stream, render)
