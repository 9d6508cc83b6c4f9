"""/v1/chat/completions: chat template, generation, and the OpenAI response or SSE stream."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

from fastapi.responses import Response, StreamingResponse

from engine.server.context import ServerContext
from engine.server.http_errors import ApiError
from engine.server.native_generate import check_prompt, sampling_params_for
from engine.server.openai.chat_output import ChatOutputDelta, ChatOutputParser, chat_output_parser
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
from engine.server.openai.tool_calls import (
    tool_call_deltas_out,
    tool_calling,
    tool_calls_out,
    with_call_grammar,
)
from engine.server.tokenizer_manager import RequestState


def usage_of(states: list[RequestState], prompt_tokens: int) -> Usage:
    completion = sum(s.completion_tokens for s in states)
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion,
        total_tokens=prompt_tokens + completion,
        prompt_tokens_details=PromptTokensDetails(
            cached_tokens=max(s.cached_tokens for s in states)
        ),
    )


async def create_chat_completion(ctx: ServerContext, body: ChatCompletionRequest) -> Response:
    calling = tool_calling(
        body.tools, body.tool_choice, ctx.args.tool_call_parser, body.parallel_tool_calls
    )
    ids = chat_prompt_ids(
        ctx.tokenizer, body.messages, body.chat_template_kwargs, calling.template_tools
    )
    if body.max_completion_tokens is not None:
        max_new = check_prompt(ctx, ids, body.max_completion_tokens, "max_completion_tokens")
    else:
        max_new = check_prompt(ctx, ids, body.max_tokens)
    raw = {**with_call_grammar(sampling_params(body, max_new), calling), "n": body.n}
    params = sampling_params_for(ctx, raw)
    # NOTE: a constrained call is JSON from its first token: no reasoning block to split off.
    reasoning = None if calling.json_schema is not None else ctx.args.reasoning_parser

    def parser() -> ChatOutputParser | None:
        return chat_output_parser(reasoning, calling.detector, calling.names)

    top = (body.top_logprobs or 0) if body.logprobs else 0
    tm = ctx.tokenizer_manager
    states = await tm.submit(ids, params, body.logprobs, top)
    response_id = f"chatcmpl-{uuid.uuid4().hex}"
    model = body.model or ctx.args.model_name
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        parsers = [parser() for _ in states]
        stream = _stream(
            ctx, states, parsers, response_id, model, len(ids), body.logprobs, include_usage
        )
        return StreamingResponse(stream, media_type="text/event-stream")
    for state in states:
        await tm.wait(state)
    errors = [s.error for s in states if s.error]
    if errors:
        raise ApiError(400, errors[0])
    choices = []
    for i, s in enumerate(states):
        message = _message(s.text, parser())
        choices.append(
            ChatChoice(
                index=i,
                message=message,
                finish_reason=_finish_reason(s, bool(message.tool_calls)),
                logprobs=chat_logprobs(ctx.tokenizer, s.output_ids, s.logprobs, s.top_logprobs)
                if body.logprobs
                else None,
            )
        )
    completion = ChatCompletion(
        object="chat.completion",
        id=response_id,
        created=int(time.time()),
        model=model,
        choices=choices,
        usage=usage_of(states, len(ids)),
    )
    return Response(encode_json(completion), media_type="application/json")


def _message(text: str, parser: ChatOutputParser | None) -> AssistantMessage:
    if parser is None:
        return AssistantMessage(role="assistant", content=text)
    output = parser.parse(text)
    calls = tool_calls_out(output.calls) or None
    # NOTE: as OpenAI: with calls, content is null unless the model also wrote some text.
    content = output.content if output.content.strip() or calls is None else None
    return AssistantMessage(
        role="assistant",
        content=content,
        reasoning_content=output.reasoning or None,
        tool_calls=calls,
    )


def _finish_reason(state: RequestState, called_tools: bool) -> str | None:
    reason = finish_reason(state.finish_reason)
    return "tool_calls" if called_tools and reason == "stop" else reason


async def _stream(
    ctx: ServerContext,
    states: list[RequestState],
    parsers: list[ChatOutputParser | None],
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
                object="chat.completion.chunk",
                id=response_id,
                created=created,
                model=model,
                choices=choices,
                usage=usage,
            )
        )

    called_tools = [False] * len(states)
    for i in range(len(states)):
        yield chunk([ChunkChoice(index=i, delta=Delta(role="assistant", content=""))])
    async with aclosing(ctx.tokenizer_manager.deltas(states)) as deltas:
        async for delta in deltas:
            state = delta.state
            if state.error:
                yield stream_error(state.error)
                break
            parser = parsers[delta.index]
            final = state.finish_reason is not None
            if parser is None:
                out = Delta(content=delta.text)
            else:
                out = _delta(parser.feed(delta.text, final))
                called_tools[delta.index] = called_tools[delta.index] or out.tool_calls is not None
            reason = _finish_reason(state, called_tools[delta.index])
            choice_logprobs = None
            if logprobs and len(state.output_ids) > delta.first_token:
                start = delta.first_token
                choice_logprobs = chat_logprobs(
                    ctx.tokenizer,
                    state.output_ids[start:],
                    state.logprobs[start:],
                    state.top_logprobs[start:],
                )
            if (
                not (out.content or out.reasoning_content or out.tool_calls)
                and reason is None
                and choice_logprobs is None
            ):
                continue
            yield chunk(
                [
                    ChunkChoice(
                        index=delta.index, delta=out, finish_reason=reason, logprobs=choice_logprobs
                    )
                ]
            )
    if include_usage:
        yield chunk([], usage_of(states, prompt_tokens))
    yield SSE_DONE


def _delta(out: ChatOutputDelta) -> Delta:
    return Delta(
        content=out.content or None,
        reasoning_content=out.reasoning or None,
        tool_calls=tool_call_deltas_out(out.calls) or None,
    )
