"""Chat messages → prompt token ids through the model's own chat template."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.server.http_errors import bad_request
from engine.server.openai.protocol import ChatMessage

_ROLES = {"system", "user", "assistant", "tool", "developer"}


def message_text(message: ChatMessage) -> str:
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    texts = []
    for part in message.content:
        if part.type != "text" or part.text is None:
            raise bad_request(f"content parts of type {part.type!r} are not supported; send text", param="messages")
        texts.append(part.text)
    return "".join(texts)


def template_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        if message.role not in _ROLES:
            raise bad_request(
                f"unknown role {message.role!r}; use one of {', '.join(sorted(_ROLES))}", param="messages"
            )
        # NOTE: OpenAI's "developer" role is the newer name of "system".
        role = "system" if message.role == "developer" else message.role
        entry: dict[str, Any] = {"role": role, "content": message_text(message)}
        if message.tool_calls:
            entry["tool_calls"] = message.tool_calls
        if message.tool_call_id:
            entry["tool_call_id"] = message.tool_call_id
        out.append(entry)
    return out


def chat_prompt_ids(
    tokenizer: PreTrainedTokenizerBase,
    messages: list[ChatMessage],
    template_kwargs: dict[str, Any] | None = None,
) -> list[int]:
    if tokenizer.chat_template is None:
        raise bad_request("this model has no chat template; use /v1/completions")
    prompt = tokenizer.apply_chat_template(
        template_messages(messages), add_generation_prompt=True, tokenize=False, **(template_kwargs or {})
    )
    # NOTE: the template already wrote any BOS it wants; do not add special tokens again.
    return tokenizer.encode(prompt, add_special_tokens=False)
