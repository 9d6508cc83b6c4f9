"""An Anthropic /v1/messages request as the chat messages, tools and sampling params the engine runs.

Content blocks map onto chat messages: tool_use blocks become the assistant's tool_calls,
tool_result blocks become ``tool`` messages (before the user's text, as Anthropic orders
them); thinking blocks from earlier turns are dropped.
"""

from __future__ import annotations

from typing import Any

from engine.server.anthropic.protocol import (
    ContentBlock,
    CountTokensRequest,
    InputMessage,
    MessagesRequest,
    ToolChoice,
)
from engine.server.chat.messages import (
    ChatMessage,
    ContentPart,
    FunctionCall,
    FunctionDefinition,
    FunctionName,
    NamedToolChoice,
    Tool,
    ToolCallMessage,
)
from engine.server.chat.messages import ToolChoice as ChatToolChoice
from engine.server.chat.template import message_text
from engine.server.http_errors import bad_request

_DROPPED_BLOCKS = {"thinking", "redacted_thinking"}
_CHOICES: dict[str, ChatToolChoice] = {"auto": "auto", "any": "required", "none": "none"}


def chat_messages(body: CountTokensRequest) -> list[ChatMessage]:
    """The Anthropic system prompt and messages as OpenAI chat messages."""
    messages = [ChatMessage(role="system", content=body.system)] if body.system else []
    for message in body.messages:
        messages += _chat_messages(message)
    return messages


def chat_tools(body: CountTokensRequest) -> list[Tool] | None:
    if not body.tools:
        return None
    return [
        Tool(
            type="function",
            function=FunctionDefinition(
                name=t.name, description=t.description, parameters=t.input_schema
            ),
        )
        for t in body.tools
    ]


def chat_tool_choice(choice: ToolChoice | None) -> ChatToolChoice | None:
    if choice is None:
        return None
    if choice.type != "tool":
        return _CHOICES[choice.type]
    if not choice.name:
        raise bad_request('tool_choice of type "tool" needs the name of a tool')
    return NamedToolChoice(type="function", function=FunctionName(name=choice.name))


def parallel_tool_calls(body: MessagesRequest) -> bool:
    return not (body.tool_choice and body.tool_choice.disable_parallel_tool_use)


def sampling_params(body: MessagesRequest) -> dict[str, Any]:
    """The request's sampling fields as the engine's sampling params (not yet validated).

    NOTE: ``ignore_eos`` and ``skip_special_tokens`` are always given, as for an OpenAI chat
    request, so they override the server's preferred params the same way.
    """
    params: dict[str, Any] = {
        "max_new_tokens": body.max_tokens,
        "ignore_eos": False,
        "skip_special_tokens": True,
    }
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(body, name)
        if value is not None:
            params[name] = value
    if body.stop_sequences:
        params["stop"] = list(body.stop_sequences)
    return params


def _chat_messages(message: InputMessage) -> list[ChatMessage]:
    if isinstance(message.content, str):
        return [ChatMessage(role=message.role, content=message.content)]
    texts: list[ContentPart] = []
    calls: list[ToolCallMessage] = []
    results: list[ChatMessage] = []
    for block in message.content:
        if block.type == "text":
            texts.append(ContentPart(type="text", text=block.text or ""))
        elif block.type == "tool_use" and message.role == "assistant":
            calls.append(_tool_call(block))
        elif block.type == "tool_result" and message.role == "user":
            results.append(
                ChatMessage(
                    role="tool", tool_call_id=block.tool_use_id, content=_result_text(block)
                )
            )
        elif block.type not in _DROPPED_BLOCKS:
            raise bad_request(
                f"{message.role} content blocks of type {block.type!r} are not supported"
            )
    if texts or calls or not results:
        results.append(ChatMessage(role=message.role, content=texts, tool_calls=calls or None))
    return results


def _tool_call(block: ContentBlock) -> ToolCallMessage:
    if not block.name or block.input is None:
        raise bad_request("a tool_use block needs a name and an input object")
    arguments: dict[str, Any] = block.input
    return ToolCallMessage(id=block.id, function=FunctionCall(name=block.name, arguments=arguments))


def _result_text(block: ContentBlock) -> str:
    # NOTE: message_text refuses non-text parts (images in a tool result) with a clear 400.
    return message_text(ChatMessage(role="tool", content=block.content))
