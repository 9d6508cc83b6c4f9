"""A bad schema, regex or grammar is a 400 with the compiler's message, in each API's error shape."""

from __future__ import annotations

import json
from typing import Any

import ollama
import openai
import pytest
from openai import OpenAI

from tests.engine.structured.conftest import SERVED_NAME
from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

BAD_SCHEMA = {"type": "objec"}
SCHEMA_MESSAGE = 'Unsupported type "objec"'
HELLO = [{"role": "user", "content": "Hello"}]


@pytest.mark.parametrize(
    ("sampling_params", "message"),
    [
        ({"json_schema": json.dumps(BAD_SCHEMA)}, SCHEMA_MESSAGE),
        ({"json_schema": "{not json"}, "Failed to parse JSON"),
        (
            {"json_schema": json.dumps({"type": "integer", "minimum": 5, "maximum": 1})},
            "minimum greater than maximum",
        ),
        ({"regex": "a(b"}, "The parenthesis is not closed"),
        ({"ebnf": "root ::= foo"}, 'Rule "foo" is not defined'),
        ({"ebnf": 'root ::= "a" |'}, "EBNF parser error"),
        ({"regex": "a", "ebnf": 'root ::= "a"'}, "mutually exclusive"),
        ({"json_schema": {"type": "object"}}, "must be a string"),
    ],
)
def test_native_generate(
    server: EngineServer, sampling_params: dict[str, Any], message: str
) -> None:
    for stream in (False, True):
        body = {"text": "Hello", "sampling_params": sampling_params, "stream": stream}
        with server.client() as client:
            reply = client.post("/generate", json=body)
        assert reply.status_code == 400, reply.text
        assert message in reply.json()["error"]["message"]


def test_openai_chat_and_completions(server: EngineServer) -> None:
    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
    bad_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": BAD_SCHEMA}}
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(
                model=SERVED_NAME,
                messages=HELLO,
                response_format=bad_format,
                stream=stream,  # type: ignore[arg-type]
            )
        assert SCHEMA_MESSAGE in err.value.message
    refusals = [
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
            "needs json_schema.schema",
        ),
        ({"response_format": {"type": "json_object"}, "regex": "a"}, "mutually exclusive"),
        ({"response_format": {"type": "yaml"}}, "response_format"),
    ]
    for extra, message in refusals:
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model=SERVED_NAME, messages=HELLO, extra_body=extra)
        assert message in err.value.message
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model=SERVED_NAME, prompt="Hi", extra_body={"regex": "[z-a]"})
    assert "lower bound is larger than upper bound" in err.value.message


def test_ollama(server: EngineServer) -> None:
    client = ollama.Client(host=server.url, timeout=60)
    for stream in (False, True):
        with pytest.raises(ollama.ResponseError) as err:
            reply = client.chat(model=SERVED_NAME, messages=HELLO, format=BAD_SCHEMA, stream=stream)
            if stream:
                list(reply)  # type: ignore[arg-type]
        assert err.value.status_code == 400
        assert SCHEMA_MESSAGE in err.value.error
    # NOTE: the ollama client refuses such a format itself, so it is sent raw.
    body = {"model": SERVED_NAME, "prompt": "Hi", "format": "yaml"}
    with server.client() as raw:
        reply = raw.post("/api/generate", json=body)
    assert reply.status_code == 400
    assert reply.json() == {"error": "format must be \"json\" or a JSON schema, got 'yaml'"}


def test_server_still_serves_after_the_refusals(server: EngineServer) -> None:
    body = {"text": "Hello", "sampling_params": {"regex": "[0-9]{3}", "max_new_tokens": 8}}
    with server.client() as client:
        reply = client.post("/generate", json=body)
    assert reply.status_code == 200 and len(reply.json()["text"]) == 3
