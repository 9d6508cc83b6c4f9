"""Chat request shapes every chat surface takes or translates into: messages, tools, tool choice.

Pydantic models, validated at the HTTP edge; OpenAI's field names (Anthropic and Ollama
requests are translated into them).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Body(BaseModel):
    # NOTE: unknown fields are ignored, as OpenAI's SDKs send fields newer than any server.
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Body):
    type: str
    text: str | None = None


class FunctionCall(_Body):
    name: str
    # NOTE: OpenAI sends a JSON string; Ollama (and some clients) an object.
    arguments: str | dict[str, Any]


class ToolCallMessage(_Body):
    """A call in an assistant message of the history."""

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Body):
    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallMessage] | None = None
    tool_call_id: str | None = None


# NOTE: OpenAI's and Anthropic's tool-name rule, plus "." for dotted (pythonic) names.
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")]


class FunctionDefinition(_Body):
    name: ToolName
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Body):
    type: Literal["function"]
    function: FunctionDefinition


class FunctionName(_Body):
    name: str


class NamedToolChoice(_Body):
    type: Literal["function"]
    function: FunctionName


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice
