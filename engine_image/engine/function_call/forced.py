"""tool_choice "required" and a named tool: the output is constrained to JSON calls, then parsed.

As in SGLang, "required" constrains the output to a non-empty array of calls to the listed
tools, and a named tool to one call object of that tool; each call is
``{"name": ..., "arguments": {...}}`` with the tool's own parameter schema for the arguments.
These need no model-specific parser, so they work on any model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.function_call.json_calls import JsonCallsDetector

# NOTE: no markers: the grammar makes the whole output the JSON, so it opens the region.
REQUIRED_CALLS = JsonCallsDetector(markers=(), bare_start="[", open="[", separator=",", close="]")
NAMED_CALL = JsonCallsDetector(markers=(), bare_start="{")


def call_schema(name: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """JSON schema of one call object to the function ``name``."""
    return {
        "type": "object",
        "properties": {"name": {"type": "string", "enum": [name]}, "arguments": dict(parameters)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def required_calls_schema(functions: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """JSON schema of a non-empty array of calls, each to one of ``functions`` (name → parameters)."""
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "anyOf": [call_schema(name, parameters) for name, parameters in functions.items()]
        },
    }
