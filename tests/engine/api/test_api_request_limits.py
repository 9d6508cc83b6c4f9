"""Requests the model cannot honour are 400s in each API's own shape (issue #22 item 4).

A ``logit_bias`` naming a token outside the vocabulary (or a non-integer key, or a value
outside [-100, 100]) is refused, as OpenAI does, and a valid one takes effect. A completion
budget larger than what the context leaves after the prompt is refused with both numbers, as
vLLM does, on OpenAI chat and completions, Anthropic messages and Responses; Ollama's
``num_predict`` and native ``/generate`` keep clamping it, as Ollama and SGLang do.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest
from anthropic import Anthropic
from openai import OpenAI

from tests.engine.api.conftest import SERVED_NAME
from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"
MESSAGES: list[Any] = [{"role": "user", "content": QUESTION}]
# NOTE: SmolLM2's greedy answer is one sentence: the stop keeps an allowed huge budget short.
SHORT: dict[str, Any] = {"temperature": 0, "stop": ["."]}


@pytest.fixture(scope="module")
def client(server: EngineServer) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def context_length(client: OpenAI) -> int:
    card = client.models.list().data[0]
    return int(card.model_extra["max_model_len"])  # type: ignore[index]


@pytest.fixture(scope="module")
def prompt_tokens(client: OpenAI) -> int:
    reply = client.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, max_tokens=1)
    assert reply.usage is not None
    return reply.usage.prompt_tokens


@pytest.mark.parametrize(
    ("bias", "fragment"),
    [({"49152": 5}, "[0, 49152)"), ({"comma": 1}, "token ids"), ({"5": 101}, "[-100, 100]")],
    ids=["outside-vocab", "non-integer-key", "value-out-of-range"],
)
def test_bad_logit_bias_is_an_openai_400(
    client: OpenAI, bias: dict[str, int], fragment: str
) -> None:
    for create in (
        lambda: client.chat.completions.create(
            model=SERVED_NAME, messages=MESSAGES, max_tokens=2, logit_bias=bias
        ),
        lambda: client.completions.create(
            model=SERVED_NAME, prompt=QUESTION, max_tokens=2, logit_bias=bias
        ),
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            create()
        error: dict[str, Any] = caught.value.body  # type: ignore[assignment]
        assert error["type"] == "invalid_request_error" and error["param"] == "logit_bias"
        assert fragment in error["message"]


def test_logit_bias_takes_effect(client: OpenAI, server: EngineServer) -> None:
    tokenized = httpx.post(
        f"{server.url}/tokenize", json={"prompt": ",", "add_special_tokens": False}, timeout=30
    )
    (comma,) = tokenized.json()["tokens"]
    reply = client.completions.create(
        model=SERVED_NAME, prompt=QUESTION, max_tokens=3, temperature=0, logit_bias={comma: 100}
    )
    assert reply.choices[0].text == ",,,"


def _too_many(context_length: int, prompt_tokens: int) -> str:
    asked = context_length - prompt_tokens + 1
    return (
        f"maximum context length is {context_length} tokens. However, you requested "
        f"{context_length + 1} tokens ({prompt_tokens} in the messages, {asked} in the completion)"
    )


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_chat_budget_beyond_the_context_is_a_400_naming_both_numbers(
    client: OpenAI, context_length: int, prompt_tokens: int, field: str
) -> None:
    room = context_length - prompt_tokens
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=SERVED_NAME, messages=MESSAGES, **{field: room + 1}, **SHORT
        )
    error: dict[str, Any] = caught.value.body  # type: ignore[assignment]
    assert _too_many(context_length, prompt_tokens) in error["message"]
    assert error["param"] == field
    # NOTE: the budget that exactly fills the context is allowed.
    reply = client.chat.completions.create(
        model=SERVED_NAME, messages=MESSAGES, **{field: room}, **SHORT
    )
    assert reply.choices[0].finish_reason == "stop"


def test_completions_budget_beyond_the_context_is_a_400(
    client: OpenAI, context_length: int
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(
            model=SERVED_NAME, prompt=[QUESTION, "Hi"], max_tokens=context_length
        )
    error: dict[str, Any] = caught.value.body  # type: ignore[assignment]
    assert f"maximum context length is {context_length} tokens" in error["message"]
    assert f"{context_length} in the completion" in error["message"]


def test_responses_budget_beyond_the_context_is_a_400(
    client: OpenAI, context_length: int
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model=SERVED_NAME, input=QUESTION, max_output_tokens=context_length
        )
    error: dict[str, Any] = caught.value.body  # type: ignore[assignment]
    assert f"{context_length} in the completion" in error["message"]
    assert error["param"] == "max_output_tokens"


def test_anthropic_budget_beyond_the_context_is_an_anthropic_400(
    server: EngineServer, context_length: int
) -> None:
    claude = Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=120)
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=SERVED_NAME, max_tokens=context_length, messages=MESSAGES)
    body: dict[str, Any] = caught.value.body  # type: ignore[assignment]
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert f"{context_length} in the completion" in body["error"]["message"]


def test_ollama_and_native_generate_still_clamp(server: EngineServer, context_length: int) -> None:
    reply = ollama.Client(host=server.url, timeout=120).chat(
        model=SERVED_NAME,
        messages=MESSAGES,
        options={"num_predict": 2 * context_length, "temperature": 0, "stop": ["."]},
    )
    assert reply.done and "Paris" in reply.message.content
    native = httpx.post(
        f"{server.url}/generate",
        json={"text": QUESTION, "sampling_params": {"max_new_tokens": 2 * context_length, **SHORT}},
        timeout=120,
    )
    assert native.status_code == 200, native.text
