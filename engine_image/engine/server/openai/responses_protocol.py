"""/v1/responses request bodies (pydantic, validated at the edge) and response objects and
stream events (msgspec Structs encoded straight to bytes; no pydantic object per token)."""

from __future__ import annotations

from typing import Any

import msgspec
from pydantic import BaseModel, ConfigDict, Field

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


def encode_json(value: msgspec.Struct) -> bytes:
    return _encoder.encode(value)


def sse_event(event: ResponseEvent | OutputItemEvent | ContentPartEvent | TextDeltaEvent | TextDoneEvent) -> bytes:
    """``event: <type>`` then ``data: <json>``, as OpenAI streams the Responses API."""
    return b"event: " + event.type.encode() + b"\ndata: " + _encoder.encode(event) + b"\n\n"
