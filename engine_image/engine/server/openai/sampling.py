"""OpenAI request fields → the engine's sampling parameters."""

from __future__ import annotations

from typing import Any

from engine.server.openai.protocol import SamplingFields

# NOTE: OpenAI field name → SGLang sampling parameter name, copied when set.
_PASSTHROUGH = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "stop_token_ids",
    "seed",
    "ignore_eos",
    "skip_special_tokens",
)


def sampling_params(request: SamplingFields, max_new_tokens: int) -> dict[str, Any]:
    params: dict[str, Any] = {"max_new_tokens": max_new_tokens}
    for name in _PASSTHROUGH:
        value = getattr(request, name)
        if value is not None:
            params[name] = value
    if request.stop:
        params["stop"] = [request.stop] if isinstance(request.stop, str) else list(request.stop)
    return params


def finish_reason(raw: dict[str, Any] | None) -> str | None:
    """SGLang's finish reason dict → OpenAI's string (stop, length, abort)."""
    return None if raw is None else str(raw["type"])
