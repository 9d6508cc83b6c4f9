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
Events are msgspec Structs encoded straight to bytes; no pydantic object per token.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Literal

import msgspec
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, bad_request
from engine.server.native_generate import check_prompt, sampling_params_for
from engine.server.openai.chat_template import chat_prompt_ids
from engine.server.openai.protocol import ChatMessage
from engine.server.tokenizer_manager import RequestState

# ---------------------------------------------------------------- request


class _Body(BaseModel):
    # NOTE: unknown fields are ignored, as OpenAI's SDKs send fields newer than any server.
    model_config = ConfigDict(extra="ignore")


class InputPart(_Body):
    type: str
    text: str | None = None


class InputItem(_Body):
    type: str = "message"
    role: str | None = None
    content: str | list[InputPart] | None = None


class TextFormat(_Body):
    type: str = "text"


class TextConfig(_Body):
    format: TextFormat | None = None


class ResponsesRequest(_Body):
    model: str | None = None
    input: str | list[InputItem]
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    stream: bool = False
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    previous_response_id: str | None = None
    text: TextConfig | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    store: bool | None = None
    parallel_tool_calls: bool | None = None
    truncation: str | None = None


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


# ---------------------------------------------------------------- response objects


class OutputText(msgspec.Struct):
    text: str
    type: str = "output_text"
    annotations: list[Any] = []
    logprobs: list[Any] = []


class OutputMessage(msgspec.Struct):
    id: str
    status: str
    content: list[OutputText]
    type: str = "message"
    role: str = "assistant"


class InputTokensDetails(msgspec.Struct):
    cached_tokens: int
    cache_write_tokens: int = 0


class OutputTokensDetails(msgspec.Struct):
    reasoning_tokens: int = 0


class ResponseUsage(msgspec.Struct):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class IncompleteDetails(msgspec.Struct):
    reason: str


class ResponseError(msgspec.Struct):
    code: str
    message: str


class TextFormatOut(msgspec.Struct):
    type: str = "text"


class TextOut(msgspec.Struct):
    format: TextFormatOut = msgspec.field(default_factory=TextFormatOut)


class ResponseObject(msgspec.Struct):
    id: str
    created_at: int
    model: str
    status: str
    output: list[OutputMessage]
    instructions: str | None
    max_output_tokens: int | None
    temperature: float | None
    top_p: float | None
    usage: ResponseUsage | None = None
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    completed_at: int | None = None
    object: str = "response"
    parallel_tool_calls: bool = True
    tool_choice: str = "auto"
    tools: list[Any] = []
    previous_response_id: str | None = None
    text: TextOut = msgspec.field(default_factory=TextOut)
    truncation: str = "disabled"
    store: bool = False
    background: bool = False
    metadata: dict[str, str] = {}
    user: str | None = None


# NOTE: ``type`` first, as OpenAI writes it; no omit_defaults (``type`` is a default).
class ResponseEvent(msgspec.Struct):
    type: str
    sequence_number: int
    response: ResponseObject


class OutputItemEvent(msgspec.Struct):
    type: str
    sequence_number: int
    output_index: int
    item: OutputMessage


class ContentPartEvent(msgspec.Struct):
    type: str
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: OutputText


class TextDeltaEvent(msgspec.Struct):
    sequence_number: int
    item_id: str
    delta: str
    type: str = "response.output_text.delta"
    output_index: int = 0
    content_index: int = 0
    logprobs: list[Any] = []


class TextDoneEvent(msgspec.Struct):
    sequence_number: int
    item_id: str
    text: str
    type: str = "response.output_text.done"
    output_index: int = 0
    content_index: int = 0
    logprobs: list[Any] = []


_encoder = msgspec.json.Encoder()


def _sse(event: Any) -> bytes:
    return b"event: " + event.type.encode() + b"\ndata: " + _encoder.encode(event) + b"\n\n"


def _usage(state: RequestState) -> ResponseUsage:
    return ResponseUsage(
        input_tokens=state.prompt_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=state.cached_tokens),
        output_tokens=state.completion_tokens,
        output_tokens_details=OutputTokensDetails(),
        total_tokens=state.prompt_tokens + state.completion_tokens,
    )


def _final_status(state: RequestState) -> tuple[str, IncompleteDetails | None]:
    kind = state.finish_reason.kind if state.finish_reason else None
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
    params = sampling_params_for(ctx, raw)
    tm = ctx.tokenizer_manager
    (state,) = await tm.submit(ids, params, False, 0)

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
        return StreamingResponse(
            _stream(ctx, state, message_id, response), media_type="text/event-stream"
        )
    await tm.wait(state)
    if state.error:
        raise ApiError(400, state.error)
    status, incomplete = _final_status(state)
    message = OutputMessage(id=message_id, status=status, content=[OutputText(text=state.text)])
    final = response(
        status,
        [message],
        usage=_usage(state),
        incomplete_details=incomplete,
        completed_at=int(time.time()),
    )
    return Response(_encoder.encode(final), media_type="application/json")


async def _stream(
    ctx: ServerContext, state: RequestState, message_id: str, response: Any
) -> AsyncIterator[bytes]:
    seq = 0

    def next_seq() -> int:
        nonlocal seq
        seq += 1
        return seq - 1

    started = response("in_progress", [])
    yield _sse(ResponseEvent("response.created", next_seq(), started))
    yield _sse(ResponseEvent("response.in_progress", next_seq(), started))
    item = OutputMessage(id=message_id, status="in_progress", content=[])
    yield _sse(OutputItemEvent("response.output_item.added", next_seq(), 0, item))
    yield _sse(
        ContentPartEvent(
            "response.content_part.added", next_seq(), message_id, 0, 0, OutputText(text="")
        )
    )
    sent = 0
    async with aclosing(ctx.tokenizer_manager.updates([state])) as updates:
        async for update in updates:
            if update.error:
                failed = response(
                    "failed", [], error=ResponseError(code="server_error", message=update.error)
                )
                yield _sse(ResponseEvent("response.failed", next_seq(), failed))
                return
            delta = update.text[sent:]
            if delta:
                sent += len(delta)
                yield _sse(TextDeltaEvent(next_seq(), message_id, delta))
    text = state.text
    status, incomplete = _final_status(state)
    part = OutputText(text=text)
    yield _sse(TextDoneEvent(next_seq(), message_id, text))
    yield _sse(ContentPartEvent("response.content_part.done", next_seq(), message_id, 0, 0, part))
    done_item = OutputMessage(id=message_id, status=status, content=[part])
    yield _sse(OutputItemEvent("response.output_item.done", next_seq(), 0, done_item))
    final = response(
        status,
        [done_item],
        usage=_usage(state),
        incomplete_details=incomplete,
        completed_at=int(time.time()),
    )
    kind: Literal["response.completed", "response.incomplete"] = (
        "response.completed" if status == "completed" else "response.incomplete"
    )
    yield _sse(ResponseEvent(kind, next_seq(), final))
