"""Ollama request bodies (pydantic, validated at the edge) and replies (msgspec, one per NDJSON line).

Field names follow Ollama's public API (docs/api.md); the official ``ollama`` client parses
the replies, so every reply carries ``model``, ``created_at`` and ``done``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict

from engine.server.chat.messages import Tool, ToolCallMessage

# ---------------------------------------------------------------- requests


class _Body(BaseModel):
    # NOTE: unknown fields are ignored, as Ollama does (it logs them and carries on); known
    # fields are type-checked strictly so "temperature": "hot" is a 400, not a coercion.
    model_config = ConfigDict(extra="ignore", strict=True)


class Options(_Body):
    """The runtime options the engine honours; load options (num_ctx, num_gpu, ...) are ignored."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    num_predict: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    repeat_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None


class Message(_Body):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None  # NOTE: null is "" to Ollama (a Go string), as some clients send it
    images: list[str] | None = None
    tool_calls: list[ToolCallMessage] | None = None


class _GenerationBody(_Body):
    model: str
    stream: bool = True
    format: str | dict[str, Any] | None = None
    options: Options | None = None
    think: bool | str | None = None


class ChatRequest(_GenerationBody):
    messages: list[Message] | None = None
    tools: list[Tool] | None = None


class GenerateRequest(_GenerationBody):
    prompt: str = ""
    system: str = ""
    raw: bool = False
    template: str = ""
    suffix: str = ""
    context: list[int] | None = None
    images: list[str] | None = None


class ShowRequest(_Body):
    model: str


# ---------------------------------------------------------------- replies


class _Out(msgspec.Struct, omit_defaults=True, kw_only=True):
    pass


class Done(_Out):
    """What the last reply of a generation adds; durations in nanoseconds."""

    done_reason: str
    total_duration: int
    load_duration: int
    prompt_eval_count: int
    prompt_eval_duration: int
    eval_count: int
    eval_duration: int


class _Reply(_Out):
    model: str
    created_at: str
    done: bool
    done_reason: str | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None


class FunctionCallReply(_Out):
    name: str
    arguments: dict[str, Any]


class ToolCallReply(_Out):
    function: FunctionCallReply


class AssistantMessage(_Out):
    role: str
    content: str
    tool_calls: list[ToolCallReply] | None = None


class ChatReply(_Reply, kw_only=True):
    message: AssistantMessage


class GenerateReply(_Reply, kw_only=True):
    response: str
    context: list[int] | None = None


class ModelDetails(_Out):
    parent_model: str
    format: str
    family: str
    families: list[str]
    parameter_size: str
    quantization_level: str


class ListedModel(_Out):
    name: str
    model: str
    modified_at: str
    size: int
    digest: str
    details: ModelDetails


class TagsReply(_Out):
    models: list[ListedModel]


class RunningModel(_Out):
    name: str
    model: str
    size: int
    digest: str
    details: ModelDetails
    expires_at: str
    size_vram: int
    context_length: int


class PsReply(_Out):
    models: list[RunningModel]


class ShowReply(_Out):
    template: str
    details: ModelDetails
    model_info: dict[str, Any]
    capabilities: list[str]
    modified_at: str


_ENCODER = msgspec.json.Encoder()


def encode_json(reply: msgspec.Struct) -> bytes:
    return _ENCODER.encode(reply)


def ndjson_line(reply: msgspec.Struct | dict[str, str]) -> bytes:
    return _ENCODER.encode(reply) + b"\n"


def done_fields(done: Done | None) -> dict[str, Any]:
    """The reply fields that say whether, and how, the generation ended."""
    return {"done": False} if done is None else {"done": True, **msgspec.structs.asdict(done)}


def timestamp(moment: datetime | None = None) -> str:
    """RFC 3339 in UTC, as Ollama writes ``created_at`` and ``modified_at``."""
    return (moment or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
