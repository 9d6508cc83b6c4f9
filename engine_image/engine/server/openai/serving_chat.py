"""/v1/chat/completions: chat template, generation, and the OpenAI response or SSE stream."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, bad_request
from engine.server.native_generate import check_prompt, sampling_params_for
from engine.server.openai.chat_template import chat_prompt_ids
from engine.server.openai.logprobs import chat_logprobs
from engine.server.openai.protocol import (
    SSE_DONE,
    AssistantMessage,
    ChatChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChunkChoice,
    Delta,
    PromptTokensDetails,
    Usage,
    encode_json,
    sse_event,
    stream_error,
)
from engine.server.openai.sampling import finish_reason, sampling_params
from engine.server.tokenizer_manager import RequestState


def _refuse_unavailable_features(body: ChatCompletionRequest) -> None:
    if body.tools and body.tool_choice != "none":
        raise bad_request(
            "tool calling is not enabled for this model: it needs a tool-call parser from the model's manifest",
            param="tools",
        )
    if body.response_format is not None and body.response_format.type != "text":
        raise bad_request("response_format json_object/json_schema is not supported yet", param="response_format")


def usage_of(states: list[RequestState], prompt_tokens: int) -> Usage:
    completion = sum(s.completion_tokens for s in states)
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion,
        total_tokens=prompt_tokens + completion,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=max(s.cached_tokens for s in states)),
    )


async def create_chat_completion(ctx: ServerContext, body: ChatCompletionRequest, request: Request) -> Response:
    _refuse_unavailable_features(body)
    ids = chat_prompt_ids(ctx.tokenizer, body.messages, body.chat_template_kwargs)
    check_prompt(ctx, ids)
    requested = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    max_new = requested if requested is not None else ctx.context_length - len(ids)
    params, _ = sampling_params_for(ctx, sampling_params(body, max_new))
    top = (body.top_logprobs or 0) if body.logprobs else 0
    tm = ctx.tokenizer_manager
    states = await tm.submit(ids, params, body.n, body.logprobs, top)
    response_id = f"chatcmpl-{uuid.uuid4().hex}"
    model = body.model or ctx.args.model_name
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        stream = _stream(ctx, states, response_id, model, len(ids), body.logprobs, include_usage)
        return StreamingResponse(stream, media_type="text/event-stream")
    for state in states:
        await tm.wait(state, request.is_disconnected)
    errors = [s.error for s in states if s.error]
    if errors:
        raise ApiError(400, errors[0])
    choices = [
        ChatChoice(
            index=i,
            message=AssistantMessage(role="assistant", content=s.text),
            finish_reason=finish_reason(s.finish_reason),
            logprobs=chat_logprobs(ctx.tokenizer, s.output_ids, s.logprobs, s.top_logprobs) if body.logprobs else None,
        )
        for i, s in enumerate(states)
    ]
    completion = ChatCompletion(
        object="chat.completion",
        id=response_id, created=int(time.time()), model=model, choices=choices, usage=usage_of(states, len(ids))
    )
    return Response(encode_json(completion), media_type="application/json")


async def _stream(
    ctx: ServerContext,
    states: list[RequestState],
    response_id: str,
    model: str,
    prompt_tokens: int,
    logprobs: bool,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    created = int(time.time())

    def chunk(choices: list[ChunkChoice], usage: Usage | None = None) -> bytes:
        return sse_event(
            ChatCompletionChunk(
                object="chat.completion.chunk", id=response_id, created=created, model=model, choices=choices, usage=usage
            )
        )

    for i in range(len(states)):
        yield chunk([ChunkChoice(index=i, delta=Delta(role="assistant", content=""))])
    async with aclosing(ctx.tokenizer_manager.deltas(states)) as deltas:
        async for delta in deltas:
            state = delta.state
            if state.error:
                yield stream_error(state.error)
                break
            reason = finish_reason(state.finish_reason)
            if not delta.text and reason is None:
                continue
            choice_logprobs = None
            if logprobs and len(state.output_ids) > delta.first_token:
                start = delta.first_token
                choice_logprobs = chat_logprobs(
                    ctx.tokenizer, state.output_ids[start:], state.logprobs[start:], state.top_logprobs[start:]
                )
            content = ChunkChoice(
                index=delta.index, delta=Delta(content=delta.text), finish_reason=reason, logprobs=choice_logprobs
            )
            yield chunk([content])
    if include_usage:
        yield chunk([], usage_of(states, prompt_tokens))
    yield SSE_DONE
