"""OpenAI request fields → the engine's sampling parameters."""

from __future__ import annotations

from typing import Any

import orjson

from engine.ipc.finish_reason import FinishReason
from engine.server.generation.params import JSON_OBJECT_SCHEMA
from engine.server.http_errors import bad_request
from engine.server.openai.protocol import ResponseFormat, SamplingFields

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
    "logit_bias",
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
    params.update(grammar_params(request))
    return params


def grammar_params(request: SamplingFields) -> dict[str, str]:
    """``response_format`` and SGLang's json_schema / regex / ebnf extras as grammar params.

    More than one of them is a 400 (here, or from the sampling params' own check).
    """
    params: dict[str, str] = {}
    if request.json_schema is not None:
        schema = request.json_schema
        params["json_schema"] = schema if isinstance(schema, str) else orjson.dumps(schema).decode()
    if request.regex is not None:
        params["regex"] = request.regex
    if request.ebnf is not None:
        params["ebnf"] = request.ebnf
    format_schema = _response_format_schema(request.response_format)
    if format_schema is not None:
        if params:
            given = next(iter(params))
            raise bad_request(
                f"response_format and {given} are mutually exclusive", param="response_format"
            )
        params["json_schema"] = format_schema
    return params


def _response_format_schema(response_format: ResponseFormat | None) -> str | None:
    if response_format is None or response_format.type == "text":
        return None
    if response_format.type == "json_object":
        return JSON_OBJECT_SCHEMA
    spec = response_format.json_schema
    if spec is None or spec.schema_ is None:
        raise bad_request(
            "response_format of type json_schema needs json_schema.schema", param="response_format"
        )
    return orjson.dumps(spec.schema_).decode()


def finish_reason(reason: FinishReason | None) -> str | None:
    """The engine's finish reason → OpenAI's string (stop, length, abort)."""
    return None if reason is None else reason.kind
