"""The tools, schemas and stream helper shared by the tool-calling API test modules."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from openai import OpenAI

MODEL = "smollm2"
WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
}
TIME_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"hour_offset": {"type": "integer", "minimum": -12, "maximum": 14}},
    "required": ["hour_offset"],
}
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": WEATHER_PARAMETERS,
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Time at a UTC offset",
            "parameters": TIME_PARAMETERS,
        },
    },
]
ANTHROPIC_TOOLS: list[Any] = [
    {"name": "get_weather", "description": "Weather in a city", "input_schema": WEATHER_PARAMETERS},
    {"name": "get_time", "description": "Time at a UTC offset", "input_schema": TIME_PARAMETERS},
]
SCHEMAS = {"get_weather": WEATHER_PARAMETERS, "get_time": TIME_PARAMETERS}


def streamed_calls(client: OpenAI, **kwargs: Any) -> tuple[list[tuple[str, str, str]], str | None]:
    """The calls (id, name, arguments) put together from a stream, and its finish reason."""
    calls: dict[int, list[str]] = {}
    finish = None
    for chunk in client.chat.completions.create(model=MODEL, stream=True, **kwargs):
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                function = delta.function
                assert function is not None
                if delta.index not in calls:
                    assert delta.id and delta.id.startswith("call_") and delta.type == "function"
                    assert function.name, "a call's first delta names it"
                    calls[delta.index] = [delta.id, function.name, ""]
                else:
                    assert delta.id is None and function.name is None
                calls[delta.index][2] += function.arguments or ""
    assert sorted(calls) == list(range(len(calls)))
    return [(c[0], c[1], c[2]) for _, c in sorted(calls.items())], finish


def check_call(name: str, arguments: str) -> dict[str, Any]:
    parsed = json.loads(arguments)
    jsonschema.validate(parsed, SCHEMAS[name])
    return parsed
