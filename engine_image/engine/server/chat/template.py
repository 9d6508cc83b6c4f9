"""Chat messages → prompt token ids through the model's own chat template."""

from __future__ import annotations

import json
from typing import Any

from jinja2 import TemplateError

from engine.server.chat.messages import ChatMessage, ToolCallMessage
from engine.server.http_errors import bad_request
from engine.text.tokenizer import TextTokenizer

_RENDER_ARGUMENTS = frozenset({"messages", "tools", "add_generation_prompt", "tokenize"})
_ROLES = {"system", "user", "assistant", "tool", "developer"}


def message_text(message: ChatMessage) -> str:
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    texts = []
    for part in message.content:
        if part.type != "text" or part.text is None:
            raise bad_request(
                f"content parts of type {part.type!r} are not supported; send text",
                param="messages",
            )
        texts.append(part.text)
    return "".join(texts)


def template_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        if message.role not in _ROLES:
            raise bad_request(
                f"unknown role {message.role!r}; use one of {', '.join(sorted(_ROLES))}",
                param="messages",
            )
        # NOTE: OpenAI's "developer" role is the newer name of "system".
        role = "system" if message.role == "developer" else message.role
        entry: dict[str, Any] = {"role": role, "content": message_text(message)}
        if message.tool_calls:
            entry["tool_calls"] = [_template_call(call) for call in message.tool_calls]
        if message.tool_call_id:
            entry["tool_call_id"] = message.tool_call_id
        out.append(entry)
    return out


def _template_call(call: ToolCallMessage) -> dict[str, Any]:
    """A history call as chat templates expect it: arguments as an object, not JSON text.

    NOTE: templates write ``arguments | tojson``; a string would be encoded twice.
    """
    # NOTE: object, not the field's type: the parsed JSON may be anything until checked below.
    arguments: object = call.function.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            raise bad_request(
                f"tool call {call.function.name!r}: function.arguments must be a JSON object",
                param="messages",
            )
    entry: dict[str, Any] = {
        "type": "function",
        "function": {"name": call.function.name, "arguments": arguments},
    }
    if call.id is not None:
        entry["id"] = call.id
    return entry


def chat_prompt_ids(
    tokenizer: TextTokenizer,
    messages: list[ChatMessage],
    template_kwargs: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """``tools`` are OpenAI tool definitions, rendered by the template where it supports them."""
    if tokenizer.chat_template is None:
        raise bad_request("this model has no chat template; use /v1/completions")
    # NOTE: the caller's template kwargs never override how the prompt is rendered.
    kwargs = {k: v for k, v in (template_kwargs or {}).items() if k not in _RENDER_ARGUMENTS}
    try:
        prompt = tokenizer.render_chat(template_messages(messages), tools, add_generation_prompt=True, **kwargs)
    except TemplateError as err:
        raise bad_request(
            f"the model's chat template refused these messages: {err}", param="messages"
        ) from None
    # NOTE: the template already wrote any BOS it wants; do not add special tokens again.
    ids: list[int] = tokenizer.encode(prompt, add_special_tokens=False)
    return ids
