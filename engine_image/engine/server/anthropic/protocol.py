"""Anthropic request bodies (pydantic, validated at the edge) and responses (msgspec, fast).

Responses and stream events are msgspec Structs tagged by their ``type`` field, so no pydantic
object is built per token. They keep their None fields (``"stop_reason": null`` and friends),
as Anthropic's API always sends them.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field

from engine.server.chat.messages import ContentPart, ToolName

# ---------------------------------------------------------------- requests


class _Body(BaseModel):
    # NOTE: unknown fields (metadata, thinking, service_tier, ...) are ignored, as with OpenAI.
    model_config = ConfigDict(extra="ignore")


class ContentBlock(_Body):
    """A request content block: text, tool_use (assistant) or tool_result (user).

    NOTE: blocks of every type parse here; serving drops thinking blocks and refuses the
    other kinds (image, document, ...).
    """

    type: str
    text: str | None = None
    id: str | None = None  # tool_use
    name: str | None = None  # tool_use
    input: dict[str, Any] | None = None  # tool_use
    tool_use_id: str | None = None  # tool_result
    content: str | list[ContentPart] | None = None  # tool_result
    is_error: bool | None = None  # tool_result


class InputMessage(_Body):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]


class ToolDefinition(_Body):
    # NOTE: a type other than "custom" is one of Anthropic's server tools (web search, ...).
    type: Literal["custom"] | None = None
    name: ToolName
    description: str | None = None
    input_schema: dict[str, Any]


class ToolChoice(_Body):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class CountTokensRequest(_Body):
    model: str
    messages: list[InputMessage] = Field(min_length=1)
    system: str | list[ContentPart] | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoice | None = None


class MessagesRequest(CountTokensRequest):
    max_tokens: int = Field(ge=1)
    stop_sequences: list[str] | None = None
    # NOTE: Anthropic's ranges, inside OpenAI's, so the translated chat request stays valid.
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = None
    stream: bool = False


# ---------------------------------------------------------------- responses

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


class _Tagged(msgspec.Struct, tag_field="type"):
    pass


class TextBlock(_Tagged, tag="text"):
    text: str


class ToolUseBlock(_Tagged, tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any]


ResponseBlock = TextBlock | ToolUseBlock


class Usage(msgspec.Struct):
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int


class Message(_Tagged, tag="message", kw_only=True):
    id: str
    role: str = "assistant"
    model: str
    content: list[ResponseBlock]
    stop_reason: StopReason | None
    stop_sequence: str | None
    usage: Usage


class CountTokensResponse(msgspec.Struct):
    input_tokens: int


class ErrorDetail(msgspec.Struct):
    type: str
    message: str


class ErrorResponse(_Tagged, tag="error"):
    error: ErrorDetail


# ---------------------------------------------------------------- stream events


class MessageStart(_Tagged, tag="message_start"):
    message: Message


class ContentBlockStart(_Tagged, tag="content_block_start"):
    index: int
    content_block: ResponseBlock


class Ping(_Tagged, tag="ping"):
    pass


class TextDelta(_Tagged, tag="text_delta"):
    text: str


class InputJsonDelta(_Tagged, tag="input_json_delta"):
    partial_json: str


class ContentBlockDelta(_Tagged, tag="content_block_delta"):
    index: int
    delta: TextDelta | InputJsonDelta


class ContentBlockStop(_Tagged, tag="content_block_stop"):
    index: int


class StopDelta(msgspec.Struct):
    stop_reason: StopReason
    stop_sequence: str | None


class DeltaUsage(msgspec.Struct):
    output_tokens: int
    cache_read_input_tokens: int


class MessageDelta(_Tagged, tag="message_delta"):
    delta: StopDelta
    usage: DeltaUsage


class MessageStop(_Tagged, tag="message_stop"):
    pass


_encoder = msgspec.json.Encoder()


def encode_json(value: msgspec.Struct) -> bytes:
    return _encoder.encode(value)


def sse_event(value: _Tagged) -> bytes:
    """``event: <type>\\ndata: <json>\\n\\n``, the event named by the Struct's tag."""
    tag = value.__struct_config__.tag
    return b"event: " + str(tag).encode() + b"\ndata: " + _encoder.encode(value) + b"\n\n"
