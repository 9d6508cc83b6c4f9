"""Twenty JSON schemas, as concurrent requests, each answer parsing and validating (jsonschema)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema
import pytest
from openai import OpenAI

from tests.engine.structured.conftest import SERVED_NAME
from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

MAX_TOKENS = 120

_POINT = {
    "type": "object",
    "properties": {
        "x": {"type": "integer", "minimum": -10, "maximum": 10},
        "y": {"type": "integer", "minimum": -10, "maximum": 10},
    },
    "required": ["x", "y"],
}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


SCHEMAS: dict[str, dict[str, Any]] = {
    "person": _object(
        {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        }
    ),
    "string_enum": _object({"color": {"enum": ["red", "green", "blue"]}}),
    "boolean": _object({"answer": {"type": "boolean"}}),
    "string_array": _object(
        {"tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}}
    ),
    "nested_address": _object(
        {
            "address": _object(
                {
                    "street": {"type": "string", "maxLength": 30},
                    "city": {"type": "string", "maxLength": 20},
                    "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                }
            )
        }
    ),
    "bounded_number": _object({"celsius": {"type": "number", "minimum": -50, "maximum": 50}}),
    "array_of_objects": _object(
        {
            "items": {
                "type": "array",
                "items": _object(
                    {
                        "name": {"type": "string", "maxLength": 15},
                        "qty": {"type": "integer", "minimum": 1, "maximum": 10},
                    }
                ),
                "minItems": 1,
                "maxItems": 2,
            }
        }
    ),
    "top_level_array": {
        "type": "array",
        "items": {"type": "integer", "minimum": 0, "maximum": 9},
        "minItems": 1,
        "maxItems": 5,
    },
    "date_pattern": _object(
        {"date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}}
    ),
    "const": _object({"version": {"const": "1.0"}, "ok": {"type": "boolean"}}),
    "any_of": _object(
        {
            "value": {
                "anyOf": [
                    {"type": "integer", "minimum": 0, "maximum": 100},
                    {"type": "string", "maxLength": 10},
                ]
            }
        }
    ),
    "optional_fields": _object(
        {
            "title": {"type": "string", "maxLength": 10},
            "pages": {"type": "integer", "maximum": 999},
        },
        required=["title"],
    ),
    "nullable": _object({"note": {"type": ["string", "null"], "maxLength": 20}}),
    "integer_enum": _object({"rating": {"enum": [1, 2, 3, 4, 5]}}),
    "string_lengths": _object({"code": {"type": "string", "minLength": 3, "maxLength": 6}}),
    "nested_arrays": _object(
        {
            "matrix": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "maximum": 9},
                    "maxItems": 2,
                },
                "maxItems": 2,
            }
        }
    ),
    "refs": {
        "$defs": {"point": _POINT},
        **_object({"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}}),
    },
    "exclusive_bounds": _object(
        {"percent": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100}}
    ),
    "deeply_nested": _object(
        {
            "user": _object(
                {
                    "profile": _object(
                        {
                            "name": {"type": "string", "maxLength": 12},
                            "languages": {
                                "type": "array",
                                "items": {"enum": ["en", "fr", "de"]},
                                "maxItems": 2,
                            },
                        }
                    )
                }
            )
        }
    ),
    "mixed_types": _object(
        {
            "id": {"type": "integer", "minimum": 1, "maximum": 1000},
            "active": {"type": "boolean"},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "label": {"enum": ["a", "b"]},
        }
    ),
}


def _ask(client: OpenAI, name: str, schema: dict[str, Any]) -> tuple[str, str | None]:
    reply = client.chat.completions.create(
        model=SERVED_NAME,
        messages=[
            {
                "role": "user",
                "content": f"Give an example {name.replace('_', ' ')} as JSON.",
            }
        ],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        },
        temperature=0,
        max_tokens=MAX_TOKENS,
    )
    choice = reply.choices[0]
    return choice.message.content or "", choice.finish_reason


def test_twenty_schemas_each_yield_valid_json(server: EngineServer) -> None:
    assert len(SCHEMAS) == 20
    for schema in SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)
    with ThreadPoolExecutor(len(SCHEMAS)) as pool:
        futures = {name: pool.submit(_ask, client, name, s) for name, s in SCHEMAS.items()}
        answers = {name: f.result() for name, f in futures.items()}
    for name, (text, finish) in answers.items():
        assert finish == "stop", f"{name}: {finish} after {text!r}"
        jsonschema.validate(json.loads(text), SCHEMAS[name])
