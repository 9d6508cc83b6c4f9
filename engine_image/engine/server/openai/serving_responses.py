"""/v1/responses (text in, text out): OpenAI's Responses API over the chat pipeline.

Request: ``model``, ``input`` (a string, or message items whose content is a string or
``input_text`` / ``output_text`` parts), ``instructions`` (the system message),
``max_output_tokens``, ``temperature``, ``top_p``, ``stream``. Nothing is stored:
``previous_response_id`` and tools are refused with a 400.

Stream: ``event: <type>`` + ``data: <json>`` per event, each with ``type`` and
``sequence_number``: response.created, response.in_progress, response.output_item.added,
response.content_part.added, response.output_text.delta..., response.output_text.done,
response.content_part.done, response.output_item.done, then response.completed (or
response.incomplete when max_output_tokens cut it, response.failed on an error).
The request and response shapes are in ``responses_protocol``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, Literal

from fastapi.responses import Response

from engine.ipc.finish_reason import FinishReason
from engine.server.chat.messages import ChatMessage
from engine.server.chat.template import chat_prompt_ids
from engine.server.context import ServerContext
from engine.server.generation.params import sampling_params_for
from engine.server.generation.prompt import check_prompt
from engine.server.generation.service import Generation, Usage, submit
from engine.server.generation.streaming import GenerationStream
from engine.server.http_errors import bad_request
from engine.server.openai.responses_protocol import (
    ContentPartEvent,
    IncompleteDetails,
    InputTokensDetails,
    OutputItemEvent,
    OutputMessage,
    OutputText,
    OutputTokensDetails,
    ResponseError,
    ResponseEvent,
    ResponseObject,
    ResponsesRequest,
    ResponseUsage,
    TextDeltaEvent,
    TextDoneEvent,
    encode_json,
    sse_event,
)

# NOTE: builds the response object in a status, with its output and any extra fields.
BuildResponse = Callable[..., ResponseObject]

_TEXT_PARTS = ("input_text", "output_text", "text")


def chat_messages(body: ResponsesRequest) -> list[ChatMessage]:
    """The request's instructions and input as chat messages."""
    messages = [ChatMessage(role="system", content=body.instructions)] if body.instructions else []
    if isinstance(body.input, str):
        return [*messages, ChatMessage(role="user", content=body.input)]
    if not body.input:
        raise bad_request("input must not be empty", param="input")
    for i, item in enumerate(body.input):
        if item.type != "message":
            raise bad_request(
                f"input[{i}]: items of type {item.type!r} are not supported; send messages",
                param="input",
            )
        if item.role is None:
            raise bad_request(f"input[{i}]: a message needs a role", param="input")
        if isinstance(item.content, list):
            texts = []
            for part in item.content:
                if part.type not in _TEXT_PARTS or part.text is None:
                    raise bad_request(
                        f"input[{i}]: content parts of type {part.type!r} are not supported; send input_text",
                        param="input",
                    )
                texts.append(part.text)
            content = "".join(texts)
        else:
            content = item.content or ""
        messages.append(ChatMessage(role=item.role, content=content))
    return messages


def _refuse_unavailable(body: ResponsesRequest) -> None:
    if body.previous_response_id is not None:
        raise bad_request("this server does not store responses; send the whole conversation in input",
                          param="previous_response_id")  # fmt: skip
    if body.tools:
        raise bad_request("tools are not supported on /v1/responses yet", param="tools")
    if body.text is not None and body.text.format is not None and body.text.format.type != "text":
        raise bad_request("only text output is supported", param="text")


def _usage(usage: Usage) -> ResponseUsage:
    return ResponseUsage(
        input_tokens=usage.prompt_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=usage.cached_tokens),
        output_tokens=usage.completion_tokens,
        output_tokens_details=OutputTokensDetails(),
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
    )


def _final_status(finish: FinishReason | None) -> tuple[str, IncompleteDetails | None]:
    kind = finish.kind if finish else None
    if kind == "length":
        return "incomplete", IncompleteDetails(reason="max_output_tokens")
    if kind == "abort":
        return "incomplete", None
    return "completed", None


# ---------------------------------------------------------------- handler


async def create_response(ctx: ServerContext, body: ResponsesRequest) -> Response:
    _refuse_unavailable(body)
    ids = chat_prompt_ids(ctx.tokenizer, chat_messages(body))
    raw: dict[str, Any] = {
        "max_new_tokens": check_prompt(ctx, ids, body.max_output_tokens, "max_output_tokens")
    }
    if body.temperature is not None:
        raw["temperature"] = body.temperature
    if body.top_p is not None:
        raw["top_p"] = body.top_p
    generation = await submit(ctx, [ids], [sampling_params_for(ctx, raw)])

    def response(status: str, output: list[OutputMessage], **extra: Any) -> ResponseObject:
        return ResponseObject(
            id=response_id,
            created_at=created,
            model=body.model or ctx.args.model_name,
            status=status,
            output=output,
            instructions=body.instructions,
            max_output_tokens=body.max_output_tokens,
            temperature=body.temperature,
            top_p=body.top_p,
            metadata=body.metadata or {},
            user=body.user,
            **extra,
        )

    response_id = f"resp_{uuid.uuid4().hex}"
    message_id = f"msg_{uuid.uuid4().hex}"
    created = int(time.time())
    if body.stream:
        stream = _stream(generation, message_id, response)
        return GenerationStream(generation, stream, "text/event-stream")
    (sample,) = await generation.results()
    status, incomplete = _final_status(sample.finish_reason)
    message = OutputMessage(id=message_id, status=status, content=[OutputText(text=sample.text)])
    final = response(
        status,
        [message],
        usage=_usage(generation.usage()),
        incomplete_details=incomplete,
        completed_at=int(time.time()),
    )
    return Response(encode_json(final), media_type="application/json")


async def _stream(
    generation: Generation, message_id: str, response: BuildResponse
) -> AsyncIterator[bytes]:
    seq = 0

    def next_seq() -> int:
        nonlocal seq
        seq += 1
        return seq - 1

    started = response("in_progress", [])
    yield sse_event(ResponseEvent("response.created", next_seq(), started))
    yield sse_event(ResponseEvent("response.in_progress", next_seq(), started))
    item = OutputMessage(id=message_id, status="in_progress", content=[])
    yield sse_event(OutputItemEvent("response.output_item.added", next_seq(), 0, item))
    yield sse_event(
        ContentPartEvent(
            "response.content_part.added", next_seq(), message_id, 0, 0, OutputText(text="")
        )
    )
    async with aclosing(generation.deltas()) as deltas:
        async for delta in deltas:
            if delta.error:
                failed = response(
                    "failed", [], error=ResponseError(code="server_error", message=delta.error)
                )
                yield sse_event(ResponseEvent("response.failed", next_seq(), failed))
                return
            if delta.text:
                yield sse_event(TextDeltaEvent(next_seq(), message_id, delta.text))
    (sample,) = generation.samples
    text = sample.text
    status, incomplete = _final_status(sample.finish_reason)
    part = OutputText(text=text)
    yield sse_event(TextDoneEvent(next_seq(), message_id, text))
    yield sse_event(ContentPartEvent("response.content_part.done", next_seq(), message_id, 0, 0, part))
    done_item = OutputMessage(id=message_id, status=status, content=[part])
    yield sse_event(OutputItemEvent("response.output_item.done", next_seq(), 0, done_item))
    final = response(
        status,
        [done_item],
        usage=_usage(generation.usage()),
        incomplete_details=incomplete,
        completed_at=int(time.time()),
    )
    kind: Literal["response.completed", "response.incomplete"] = (
        "response.completed" if status == "completed" else "response.incomplete"
    )
    yield sse_event(ResponseEvent(kind, next_seq(), final))
