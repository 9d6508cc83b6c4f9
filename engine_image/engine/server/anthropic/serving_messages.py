"""/v1/messages and /v1/messages/count_tokens: an adapter over the shared chat pipeline.

An Anthropic request is translated into chat messages, tools and sampling params and runs
through the same building blocks as /v1/chat/completions (chat template, tool calling, the
generation service); only the answer is shaped the Anthropic way.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

import orjson
from fastapi.responses import Response

from engine.server.anthropic.chat_translation import (
    chat_messages,
    chat_tool_choice,
    chat_tools,
    parallel_tool_calls,
    sampling_params,
)
from engine.server.anthropic.errors import error_body
from engine.server.anthropic.protocol import (
    ContentBlockStart,
    CountTokensRequest,
    CountTokensResponse,
    DeltaUsage,
    Message,
    MessageDelta,
    MessagesRequest,
    MessageStart,
    MessageStop,
    Ping,
    ResponseBlock,
    StopDelta,
    StopReason,
    TextBlock,
    ToolUseBlock,
    Usage,
    encode_json,
    sse_event,
)
from engine.server.anthropic.stream_blocks import BlockEvents, new_tool_use_id
from engine.server.chat.output import ChatOutputParser, chat_output_parser
from engine.server.chat.template import chat_prompt_ids
from engine.server.chat.tool_calling import tool_calling, with_call_grammar
from engine.server.context import ServerContext
from engine.server.generation.params import sampling_params_for
from engine.server.generation.prompt import check_prompt
from engine.server.generation.service import Generation, Sample, submit
from engine.server.generation.service import Usage as GenerationUsage
from engine.server.generation.streaming import GenerationStream
from engine.server.http_errors import ApiError


def count_tokens(ctx: ServerContext, body: CountTokensRequest) -> Response:
    # NOTE: tools count as /v1/messages would render them, and are refused where it would.
    calling = tool_calling(
        chat_tools(body), chat_tool_choice(body.tool_choice), ctx.args.tool_call_parser
    )
    ids = chat_prompt_ids(ctx.tokenizer, chat_messages(body), None, calling.template_tools)
    return Response(
        encode_json(CountTokensResponse(input_tokens=len(ids))), media_type="application/json"
    )


def stop_reason(sample: Sample) -> tuple[StopReason, str | None]:
    """A finished sample's stop_reason and stop_sequence; an ApiError if it failed or was aborted."""
    finish = sample.finish_reason
    if sample.error:
        raise ApiError(400, sample.error)
    if finish is not None and finish.kind == "length":
        return "max_tokens", None
    if finish is not None and finish.kind == "stop":
        matched = finish.matched
        # NOTE: an int is a stop token (EOS); a str is one of the request's stop_sequences.
        return ("stop_sequence", matched) if isinstance(matched, str) else ("end_turn", None)
    raise ApiError(500, "the request was aborted before it finished", type_="api_error")


async def create_message(ctx: ServerContext, body: MessagesRequest) -> Response:
    calling = tool_calling(
        chat_tools(body),
        chat_tool_choice(body.tool_choice),
        ctx.args.tool_call_parser,
        parallel_tool_calls(body),
    )
    ids = chat_prompt_ids(ctx.tokenizer, chat_messages(body), None, calling.template_tools)
    check_prompt(ctx, ids, body.max_tokens)
    params = sampling_params_for(ctx, with_call_grammar(sampling_params(body), calling))
    # NOTE: reasoning stays in the text here: thinking blocks are not produced.
    parser = chat_output_parser(None, calling.detector, calling.names)
    generation = await submit(ctx, [ids], [params])
    message_id = f"msg_{uuid.uuid4().hex}"
    if body.stream:
        stream = _stream(generation, parser, message_id, body.model)
        return GenerationStream(generation, stream, "text/event-stream")
    (sample,) = await generation.results()
    reason, sequence = stop_reason(sample)
    content = _blocks(sample.text, parser)
    if reason == "end_turn" and any(isinstance(block, ToolUseBlock) for block in content):
        reason = "tool_use"
    message = Message(
        id=message_id,
        model=body.model,
        content=content,
        stop_reason=reason,
        stop_sequence=sequence,
        usage=_usage(generation.usage()),
    )
    return Response(encode_json(message), media_type="application/json")


def _blocks(text: str, parser: ChatOutputParser | None) -> list[ResponseBlock]:
    if parser is None:
        return [TextBlock(text=text)]
    output = parser.parse(text)
    blocks: list[ResponseBlock] = []
    if output.content.strip() or not output.calls:
        blocks.append(TextBlock(text=output.content))
    for call in output.calls:
        blocks.append(
            ToolUseBlock(id=new_tool_use_id(), name=call.name, input=orjson.loads(call.arguments))
        )
    return blocks


def _usage(usage: GenerationUsage) -> Usage:
    return Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cache_read_input_tokens=usage.cached_tokens,
    )


async def _stream(
    generation: Generation,
    parser: ChatOutputParser | None,
    message_id: str,
    model: str,
) -> AsyncIterator[bytes]:
    start = Message(
        id=message_id,
        model=model,
        content=[],
        stop_reason=None,
        stop_sequence=None,
        usage=_usage(generation.usage()),
    )
    yield sse_event(MessageStart(message=start))
    blocks = BlockEvents(text_open=parser is None)
    if parser is None:
        yield sse_event(ContentBlockStart(index=0, content_block=TextBlock(text="")))
    yield sse_event(Ping())
    async with aclosing(generation.deltas()) as deltas:
        async for delta in deltas:
            if parser is None:
                events = blocks.text(delta.text)
            else:
                out = parser.feed(delta.text, final=delta.finished)
                events = blocks.text(out.content)
                for call in out.calls:
                    events += blocks.call(call)
            for event in events:
                yield sse_event(event)
    (sample,) = generation.samples
    try:
        reason, sequence = stop_reason(sample)
    except ApiError as err:
        yield sse_event(error_body(err))
        return
    for event in blocks.close():
        yield sse_event(event)
    if reason == "end_turn" and blocks.called_tools:
        reason = "tool_use"
    usage = generation.usage()
    delta_usage = DeltaUsage(
        output_tokens=usage.completion_tokens, cache_read_input_tokens=usage.cached_tokens
    )
    yield sse_event(
        MessageDelta(delta=StopDelta(stop_reason=reason, stop_sequence=sequence), usage=delta_usage)
    )
    yield sse_event(MessageStop())
