"""Ollama's load-only requests: `/api/generate` without a prompt, `/api/chat` without messages.

Ollama loads the model (or, with `keep_alive` 0, unloads it) and answers at once, generating
nothing; the router does the same for models in its loader's catalog.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

GENERATE = "/api/generate"
CHAT = "/api/chat"


def is_load_only(route: str, payload: dict[str, Any]) -> bool:
    if route == GENERATE:
        return not payload.get("prompt") and not payload.get("images")
    return route == CHAT and not payload.get("messages")


def load_reply(route: str, model: str, *, unloaded: bool) -> bytes:
    """Ollama's answer: `done` with done_reason "load" or "unload"."""
    created_at = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    reply: dict[str, Any] = {"model": model, "created_at": created_at}
    if route == CHAT:
        reply["message"] = {"role": "assistant", "content": ""}
    else:
        reply["response"] = ""
    reply.update(done=True, done_reason="unload" if unloaded else "load")
    return orjson.dumps(reply)
