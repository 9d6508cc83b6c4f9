"""/v1/chat/completions: chat template, generation, and the OpenAI response or SSE stream."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

from fastapi.responses import Response

from engine.ipc.finish_reason import FinishReason
from engine.server.chat.output import ChatOutputDelta, ChatOutputParser, chat_output_parser
from engine.server.chat.template import chat_prompt_ids
from engine.server.chat.tool_calling import tool_calling, with_call_grammar
from engine.server.context import ServerContext
from engine.server.generation.params import sampling_params_for
from engine.server.generation.prompt import check_prompt
from engine.server.generation.service import Generation, submit
from engine.server.generation.service import Usage as GenerationUsage
from engine.server.generation.streaming import GenerationStream
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
from engine.server.openai.tool_calls import tool_call_deltas_out, tool_calls_out


def usage_out(usage: GenerationUsage) -> Usage:
    """A generation's usage in OpenAI's shape (chat and completions)."""
    return Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_tokens),
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
    generation = await submit(ctx, [ids], [params], body.logprobs, top)
    response_id = f"chatcmpl-{uuid.uuid4().hex}"
    model = body.model or ctx.args.model_name
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        parsers = [parser() for _ in generation.samples]
        stream = _stream(ctx, generation, parsers, response_id, model, body.logprobs, include_usage)
        return GenerationStream(generation, stream, "text/event-stream")
    choices = []
    for i, s in enumerate(await generation.results()):
        message = _message(s.text, parser())
        choices.append(
            ChatChoice(
                index=i,
                message=message,
                finish_reason=_finish_reason(s.finish_reason, bool(message.tool_calls)),
                logprobs=chat_logprobs(ctx.tokenizer, s.token_ids, s.logprobs, s.top_logprobs)
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
        usage=usage_out(generation.usage()),
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


def _finish_reason(finish: FinishReason | None, called_tools: bool) -> str | None:
    reason = finish_reason(finish)
    return "tool_calls" if called_tools and reason == "stop" else reason


async def _stream(
    ctx: ServerContext,
    generation: Generation,
    parsers: list[ChatOutputParser | None],
    response_id: str,
    model: str,
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

    called_tools = [False] * len(generation.samples)
    for i in range(len(generation.samples)):
        yield chunk([ChunkChoice(index=i, delta=Delta(role="assistant", content=""))])
    async with aclosing(generation.deltas()) as deltas:
        async for delta in deltas:
            if delta.error:
                yield stream_error(delta.error)
                break
            parser = parsers[delta.index]
            final = delta.finish_reason is not None
            if parser is None:
                out = Delta(content=delta.text)
            else:
                out = _delta(parser.feed(delta.text, final))
                called_tools[delta.index] = called_tools[delta.index] or out.tool_calls is not None
            reason = _finish_reason(delta.finish_reason, called_tools[delta.index])
            choice_logprobs = None
            if logprobs and delta.token_ids:
                choice_logprobs = chat_logprobs(
                    ctx.tokenizer, delta.token_ids, delta.logprobs, delta.top_logprobs
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
        yield chunk([], usage_out(generation.usage()))
    yield SSE_DONE


def _delta(out: ChatOutputDelta) -> Delta:
    return Delta(
        content=out.content or None,
        reasoning_content=out.reasoning or None,
        tool_calls=tool_call_deltas_out(out.calls) or None,
    )
