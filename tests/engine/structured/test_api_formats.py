"""OpenAI response_format (json_schema, json_object, parse) and Ollama format, via the official clients."""

from __future__ import annotations

import json

import jsonschema
import ollama
import pytest
from openai import OpenAI
from pydantic import BaseModel, Field

from tests.engine.structured.conftest import SERVED_NAME
from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "country": {"type": "string", "maxLength": 20},
        "population_millions": {"type": "integer", "minimum": 0, "maximum": 40},
    },
    "required": ["city", "country", "population_millions"],
    "additionalProperties": False,
}
ASK_CITY = [{"role": "user", "content": "Describe the capital of France as JSON."}]
JSON_SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}


class City(BaseModel):
    city: str = Field(max_length=20)
    country: str = Field(max_length=20)


@pytest.fixture(scope="module")
def client(server: EngineServer) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)


def test_json_schema_streamed_equals_non_streamed(client: OpenAI) -> None:
    kwargs = {"model": SERVED_NAME, "messages": ASK_CITY, "temperature": 0, "max_tokens": 60}
    whole = client.chat.completions.create(**kwargs, response_format=JSON_SCHEMA_FORMAT)  # type: ignore[call-overload]
    text = whole.choices[0].message.content or ""
    jsonschema.validate(json.loads(text), CITY)
    assert whole.choices[0].finish_reason == "stop"
    chunks = client.chat.completions.create(  # type: ignore[call-overload]
        **kwargs, response_format=JSON_SCHEMA_FORMAT, stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text


def test_json_object_and_parse_with_a_pydantic_model(client: OpenAI) -> None:
    reply = client.chat.completions.create(
        model=SERVED_NAME,
        messages=ASK_CITY,
        response_format={"type": "json_object"},
        temperature=0,
        max_tokens=60,
    )
    assert reply.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(reply.choices[0].message.content or ""), dict)
    parsed = client.chat.completions.parse(
        model=SERVED_NAME, messages=ASK_CITY, response_format=City, temperature=0, max_tokens=60
    )
    city = parsed.choices[0].message.parsed
    assert isinstance(city, City) and city.city


def test_ollama_format_schema_and_json(server: EngineServer) -> None:
    client = ollama.Client(host=server.url, timeout=300)
    options = {"temperature": 0, "num_predict": 60}
    chat = client.chat(model=SERVED_NAME, messages=ASK_CITY, format=CITY, options=options)
    jsonschema.validate(json.loads(chat.message.content or ""), CITY)
    assert chat.done_reason == "stop"
    streamed = client.chat(
        model=SERVED_NAME, messages=ASK_CITY, format=CITY, options=options, stream=True
    )
    assert "".join(part.message.content or "" for part in streamed) == chat.message.content
    generated = client.generate(
        model=SERVED_NAME, prompt="Describe Paris as JSON.", format="json", options=options
    )
    assert isinstance(json.loads(generated.response), dict)
