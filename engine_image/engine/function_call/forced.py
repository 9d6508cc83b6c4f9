"""tool_choice "required" and a named tool: the output is constrained to JSON calls, then parsed.

As in SGLang, "required" constrains the output to a non-empty array of calls to the listed
tools (exactly one with ``parallel_tool_calls: false``), and a named tool to one call object
of that tool; each call is ``{"name": ..., "arguments": {...}}`` with the tool's own
parameter schema for the arguments. These need no model-specific parser, so they work on any
model. An output cut off by max_tokens answers the complete calls decoded so far (see
``ToolCallDetector.whole_output``), never the raw JSON as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.function_call.json_calls import JsonCallsDetector

# NOTE: no markers: the grammar makes the whole output the JSON, so it opens the region.
REQUIRED_CALLS = JsonCallsDetector(
    markers=(), bare_start="[", open="[", separator=",", close="]", whole_output=True
)
NAMED_CALL = JsonCallsDetector(markers=(), bare_start="{", whole_output=True)


def call_schema(name: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """JSON schema of one call object to the function ``name``."""
    return {
        "type": "object",
        "properties": {"name": {"type": "string", "enum": [name]}, "arguments": dict(parameters)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def required_calls_schema(
    functions: Mapping[str, Mapping[str, Any]], parallel: bool = True
) -> dict[str, Any]:
    """JSON schema of a non-empty array of calls, each to one of ``functions`` (name → params).

    Not ``parallel``: exactly one call, so the grammar closes the array after it (a small model
    decoding greedily would otherwise repeat the call until max_tokens).
    """
    schema: dict[str, Any] = {
        "type": "array",
        "minItems": 1,
        "items": {
            "anyOf": [call_schema(name, parameters) for name, parameters in functions.items()]
        },
    }
    if not parallel:
        schema["maxItems"] = 1
    return schema
