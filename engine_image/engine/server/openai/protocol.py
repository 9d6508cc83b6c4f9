"""OpenAI request bodies (pydantic, validated at the edge) and responses (msgspec, fast).

NOTE (seed 002): streamed chunks are msgspec Structs with ``omit_defaults`` encoded
straight to bytes, so no pydantic object is built per token.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field

from engine.server.chat.messages import ChatMessage, Tool, ToolChoice

# ---------------------------------------------------------------- requests


class _Body(BaseModel):
    # NOTE: unknown fields are ignored, as OpenAI's SDKs send fields newer than any server.
    model_config = ConfigDict(extra="ignore")


class StreamOptions(_Body):
    include_usage: bool = False


class JsonSchemaFormat(_Body):
    """``response_format.json_schema``; the schema is always enforced, strict or not."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    description: str | None = None
    # NOTE: aliased, as a field named "schema" would shadow pydantic's BaseModel.schema.
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class SamplingFields(_Body):
    """Fields shared by chat and completions, including SGLang's extras (top_k, min_p, ...)."""

    model: str | None = None
    n: int = Field(default=1, ge=1, le=128)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = None
    min_p: float | None = None
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    # NOTE: token id → bias in [-100, 100]; ids and values are checked with the sampling params.
    logit_bias: dict[str, float] | None = None
    seed: int | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    # Structured output: OpenAI's response_format, or SGLang's extras (at most one of them).
    response_format: ResponseFormat | None = None
    json_schema: str | dict[str, Any] | None = None
    regex: str | None = None
    ebnf: str | None = None


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=0)
    max_completion_tokens: int | None = Field(default=None, ge=0)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool = True
    chat_template_kwargs: dict[str, Any] | None = None


class CompletionRequest(SamplingFields):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(default=16, ge=0)
    logprobs: int | None = Field(default=None, ge=0, le=20)
    echo: bool = False
    suffix: str | None = None


# ---------------------------------------------------------------- responses


class _Out(msgspec.Struct, omit_defaults=True):
    """Response base: None-valued optional fields are omitted from the JSON.

    NOTE: ``object`` and ``role`` have no defaults on purpose: omit_defaults would drop
    them, and clients need them.
    """


class PromptTokensDetails(_Out):
    cached_tokens: int


class Usage(_Out):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None


class TopLogprob(_Out):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprob(_Out):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[TopLogprob] = []


class ChoiceLogprobs(_Out):
    content: list[TokenLogprob]


class FunctionCallOut(_Out):
    name: str
    arguments: str


class ToolCallOut(_Out):
    id: str
    type: str
    function: FunctionCallOut


class AssistantMessage(_Out):
    role: str
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallOut] | None = None


class ChatChoice(_Out):
    index: int
    message: AssistantMessage
    finish_reason: str | None = None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletion(_Out):
    object: str
    id: str
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage


class FunctionCallDelta(_Out):
    name: str | None = None
    arguments: str | None = None


class ToolCallDeltaOut(_Out):
    """A streamed call: the first one of an index carries id, type and name."""

    index: int
    function: FunctionCallDelta
    id: str | None = None
    type: str | None = None


class Delta(_Out):
    role: str | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDeltaOut] | None = None


class ChunkChoice(_Out):
    index: int
    delta: Delta
    finish_reason: str | None = None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletionChunk(_Out):
    object: str
    id: str
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None


class CompletionLogprobs(_Out):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]] | None = None
    text_offset: list[int] | None = None


class CompletionChoice(_Out):
    index: int
    text: str
    finish_reason: str | None = None
    logprobs: CompletionLogprobs | None = None


class Completion(_Out):
    object: str
    id: str
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ModelCard(_Out):
    object: str
    id: str
    created: int
    owned_by: str
    root: str
    max_model_len: int


class ModelList(_Out):
    object: str
    data: list[ModelCard]


_encoder = msgspec.json.Encoder()


def encode_json(value: msgspec.Struct) -> bytes:
    return _encoder.encode(value)


def sse_event(value: msgspec.Struct) -> bytes:
    return b"data: " + _encoder.encode(value) + b"\n\n"


def stream_error(message: str) -> bytes:
    """An error inside an SSE stream, in the OpenAI shape, before ``[DONE]``."""
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return b"data: " + _encoder.encode({"error": error}) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"
