"""/v1/messages and /v1/messages/count_tokens: an adapter over the OpenAI chat handling.

An Anthropic request is translated into a ``ChatCompletionRequest`` and runs through the
same building blocks as /v1/chat/completions (chat template, prompt check, sampling params,
the TokenizerManager); only the answer is shaped the Anthropic way.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from engine.server.anthropic.errors import error_body
from engine.server.anthropic.protocol import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    CountTokensRequest,
    CountTokensResponse,
    DeltaUsage,
    Message,
    MessageDelta,
    MessagesRequest,
    MessageStart,
    MessageStop,
    Ping,
    StopDelta,
    StopReason,
    TextBlock,
    TextDelta,
    Usage,
    encode_json,
    sse_event,
)
from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, bad_request
from engine.server.native_generate import check_prompt, sampling_params_for
from engine.server.openai.chat_template import chat_prompt_ids
from engine.server.openai.protocol import ChatCompletionRequest, ChatMessage, ContentPart
from engine.server.openai.sampling import sampling_params
from engine.server.tokenizer_manager import RequestState

_TOOL_BLOCKS = {"tool_use", "tool_result"}
_NO_TOOLS = "tool calling is not enabled for this model: it needs a tool-call parser from the model's manifest"


def _check_blocks(content: str | list[ContentPart] | None) -> None:
    # NOTE: other non-text blocks (image, document, ...) are refused by the chat template's
    # message_text, which only takes text parts.
    if isinstance(content, list) and any(block.type in _TOOL_BLOCKS for block in content):
        raise bad_request(_NO_TOOLS)


def chat_messages(body: CountTokensRequest) -> list[ChatMessage]:
    """The Anthropic system prompt and messages as OpenAI chat messages."""
    if body.tools:
        raise bad_request(_NO_TOOLS)
    _check_blocks(body.system)
    messages = [ChatMessage(role="system", content=body.system)] if body.system else []
    for message in body.messages:
        _check_blocks(message.content)
        messages.append(ChatMessage(role=message.role, content=message.content))
    return messages


def chat_request(body: MessagesRequest) -> ChatCompletionRequest:
    return ChatCompletionRequest(
        model=body.model,
        messages=chat_messages(body),
        max_tokens=body.max_tokens,
        stop=body.stop_sequences,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
        stream=body.stream,
    )


def count_tokens(ctx: ServerContext, body: CountTokensRequest) -> Response:
    ids = chat_prompt_ids(ctx.tokenizer, chat_messages(body))
    return Response(encode_json(CountTokensResponse(input_tokens=len(ids))), media_type="application/json")


def stop_reason(state: RequestState) -> tuple[StopReason, str | None]:
    """A finished request's stop_reason and stop_sequence; an ApiError if it failed or was aborted."""
    finish = state.finish_reason
    if state.error:
        raise ApiError(400, state.error)
    if finish is not None and finish["type"] == "length":
        return "max_tokens", None
    if finish is not None and finish["type"] == "stop":
        matched = finish.get("matched")
        # NOTE: an int is a stop token (EOS); a str is one of the request's stop_sequences.
        return ("stop_sequence", matched) if isinstance(matched, str) else ("end_turn", None)
    raise ApiError(500, "the request was aborted before it finished", type_="api_error")


async def create_message(ctx: ServerContext, body: MessagesRequest, request: Request) -> Response:
    chat = chat_request(body)
    ids = chat_prompt_ids(ctx.tokenizer, chat.messages)
    check_prompt(ctx, ids)
    params, _ = sampling_params_for(ctx, sampling_params(chat, body.max_tokens))
    tm = ctx.tokenizer_manager
    (state,) = await tm.submit(ids, params, 1, False, 0)
    message_id = f"msg_{uuid.uuid4().hex}"
    if body.stream:
        return StreamingResponse(_stream(ctx, state, message_id, body.model), media_type="text/event-stream")
    await tm.wait(state, request.is_disconnected)
    reason, sequence = stop_reason(state)
    message = Message(
        id=message_id,
        model=body.model,
        content=[TextBlock(text=state.text)],
        stop_reason=reason,
        stop_sequence=sequence,
        usage=_usage(state),
    )
    return Response(encode_json(message), media_type="application/json")


def _usage(state: RequestState) -> Usage:
    return Usage(
        input_tokens=state.prompt_tokens,
        output_tokens=state.completion_tokens,
        cache_read_input_tokens=state.cached_tokens,
    )


async def _stream(ctx: ServerContext, state: RequestState, message_id: str, model: str) -> AsyncIterator[bytes]:
    start = Message(id=message_id, model=model, content=[], stop_reason=None, stop_sequence=None, usage=_usage(state))
    yield sse_event(MessageStart(message=start))
    yield sse_event(ContentBlockStart(index=0, content_block=TextBlock(text="")))
    yield sse_event(Ping())
    sent = 0
    async with aclosing(ctx.tokenizer_manager.updates([state])) as updates:
        async for _ in updates:
            if len(state.text) > sent:
                yield sse_event(ContentBlockDelta(index=0, delta=TextDelta(text=state.text[sent:])))
                sent = len(state.text)
    try:
        reason, sequence = stop_reason(state)
    except ApiError as err:
        yield sse_event(error_body(err))
        return
    yield sse_event(ContentBlockStop(index=0))
    usage = DeltaUsage(output_tokens=state.completion_tokens, cache_read_input_tokens=state.cached_tokens)
    yield sse_event(MessageDelta(delta=StopDelta(stop_reason=reason, stop_sequence=sequence), usage=usage))
    yield sse_event(MessageStop())
