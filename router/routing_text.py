"""The text a request's prompt starts with, as cache-aware routing compares it across requests.

Not the exact prompt the engine builds (the router has no chat template): the same
conversation gives the same text, and a conversation that grows keeps its text's prefix,
which is all a prefix match needs. The system prompt, tools and messages come in order;
fields that do not change the prompt's start (sampling, stream) are left out.
"""

from __future__ import annotations

from typing import Any

import orjson

# NOTE: the prefix decides the replica; past this many characters a longer match changes
# nothing but the tree's size and the time spent walking it.
MAX_ROUTING_CHARS = 16384
_SEPARATOR = "\x1e"  # NOTE: a record separator, so "a" + "bc" and "ab" + "c" differ


def routing_text(payload: dict[str, Any]) -> str:
    """The prompt's text for `payload` (an OpenAI, Anthropic or Ollama body); '' when none."""
    parts: list[str] = []
    for key in ("system", "tools", "instructions"):
        if key in payload:
            parts.append(_text(payload[key]))
    if isinstance(messages := payload.get("messages"), list):
        for message in messages:
            if isinstance(message, dict):
                parts.append(f"{message.get('role', '')}:{_text(message.get('content'))}")
    for key in ("prompt", "input"):
        if key in payload:
            parts.append(_text(payload[key]))
    return _SEPARATOR.join(parts)[:MAX_ROUTING_CHARS]


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return _SEPARATOR.join(value)
    if isinstance(value, list):
        # NOTE: content parts: their text in order; an image part as its JSON (a URL or data).
        return _SEPARATOR.join(
            v["text"] if isinstance(v, dict) and isinstance(v.get("text"), str) else _json(v)
            for v in value
        )
    return "" if value is None else _json(value)


def _json(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
