"""Bad /generate input is a 400 with an OpenAI-shaped error, and the server keeps serving."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("content", "headers", "needle"),
    [
        (b'{"text": "hi", ', JSON, "not valid JSON"),
        (
            b'{"text": "hi"}',
            {"content-type": "text/plain"},
            "Content-Type must be application/json",
        ),
    ],
    ids=["malformed-json", "text-plain"],
)
def test_bad_body(
    client: httpx.Client, content: bytes, headers: dict[str, str], needle: str
) -> None:
    reply = client.post("/generate", content=content, headers=headers)
    assert reply.status_code == 400, reply.text
    assert needle in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"text": 5}, "invalid field text"),
        ({"text": "hi", "stream": "yes"}, "invalid field stream"),
        ({"text": "hi", "sampling_params": {"temperature": "hot"}}, "temperature"),
        ({"text": "hi", "input_ids": [1, 2]}, "exactly one of text or input_ids"),
        ({"text": []}, "batch is empty"),
        ({"input_ids": [1] * 9000}, "context length is 8192"),
        ({"text": "hi", "sampling_params": {"warmth": 1}}, "unknown sampling parameter 'warmth'"),
        ({"text": "hi", "sampling_params": {"max_new_tokens": -1}}, "max_new_tokens"),
        ({"text": "hi", "colour": "blue"}, "invalid field colour"),
    ],
    ids=[
        "text-int",
        "stream-str",
        "temperature-str",
        "text-and-input-ids",
        "empty-batch",
        "too-long",
        "unknown-sampling-param",
        "negative-max-new-tokens",
        "unknown-field",
    ],
)
def test_bad_fields(client: httpx.Client, body: dict[str, Any], needle: str) -> None:
    reply = client.post("/generate", json=body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert isinstance(error["message"], str)
    assert needle in error["message"]


def test_still_serving_after_bad_input(
    client: httpx.Client,
    generate_france: Callable[[httpx.Client], dict[str, Any]],
    wait_idle: Callable[..., dict[str, Any]],
) -> None:
    for _ in range(3):
        assert client.post("/generate", json={"text": 5}).status_code == 400
    generate_france(client)
    wait_idle(client)
