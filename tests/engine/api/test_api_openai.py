"""The official openai client against the real engine server on SmolLM2."""

from __future__ import annotations

import httpx
import openai
import pytest
from openai import OpenAI

from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

MODEL = "smollm2"
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]




@pytest.fixture(scope="module")
def client(server: EngineServer) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120)




def test_models_listing(client: OpenAI, server: EngineServer) -> None:
    models = client.models.list().data
    assert [m.id for m in models] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError) as err:
        client.models.retrieve("nope")
    assert err.value.body["code"] == "model_not_found"  # type: ignore[index]


def test_chat_non_streamed_with_exact_usage(client: OpenAI, server: EngineServer) -> None:
    reply = client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=30)
    choice = reply.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "The capital of France is Paris."
    assert choice.finish_reason == "stop"
    assert reply.usage is not None
    # The prompt is the chat-templated question; the completion counts the eos token too.
    assert reply.usage.prompt_tokens == 37
    assert reply.usage.completion_tokens == server.token_count(choice.message.content) + 1
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_chat_streamed_equals_non_streamed(client: OpenAI) -> None:
    whole = client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=30)
    stream = client.chat.completions.create(
        model=MODEL, messages=FRANCE, temperature=0, max_tokens=30, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishing) == 1 and finishing[0].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]


def test_completions(client: OpenAI) -> None:
    reply = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=5, temperature=0)
    assert reply.choices[0].text.strip().startswith("Paris")
    assert reply.usage is not None and reply.usage.completion_tokens == 5
    assert reply.choices[0].finish_reason == "length"
    streamed = client.completions.create(
        model=MODEL, prompt="The capital of France is", max_tokens=5, temperature=0, stream=True
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices) == reply.choices[0].text


def test_stop_sequences(client: OpenAI) -> None:
    full = client.completions.create(model=MODEL, prompt="1, 2, 3, 4,", max_tokens=12, temperature=0)
    assert "7" in full.choices[0].text
    stopped = client.completions.create(model=MODEL, prompt="1, 2, 3, 4,", max_tokens=12, temperature=0, stop=["7"])
    assert stopped.choices[0].text == full.choices[0].text[: full.choices[0].text.index("7")]
    assert stopped.choices[0].finish_reason == "stop"
    chat = client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=30, stop=[" Paris"])
    assert chat.choices[0].message.content == "The capital of France is"


def test_n2_and_seed_reproducibility(client: OpenAI) -> None:
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 12}
    first = client.chat.completions.create(**ask, n=2, temperature=0.9, seed=11)
    second = client.chat.completions.create(**ask, n=2, temperature=0.9, seed=11)
    assert [c.index for c in first.choices] == [0, 1]
    assert [c.message.content for c in first.choices] == [c.message.content for c in second.choices]
    assert first.choices[0].message.content != first.choices[1].message.content
    assert first.usage is not None and first.usage.completion_tokens == 24


def test_logprobs(client: OpenAI) -> None:
    reply = client.chat.completions.create(
        model=MODEL, messages=FRANCE, temperature=0, max_tokens=30, logprobs=True, top_logprobs=3
    )
    content = reply.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content is not None and len(content) == reply.usage.completion_tokens  # type: ignore[union-attr]
    assert "".join(t.token for t in content[:-1]) == reply.choices[0].message.content
    for token in content:
        assert token.logprob <= 0 and len(token.top_logprobs) == 3
        # Greedy: the chosen token is the most likely one.
        assert token.top_logprobs[0].logprob == pytest.approx(token.logprob)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"model": MODEL}, "messages"),
        ({"model": MODEL, "messages": []}, "messages"),
        ({"model": MODEL, "messages": [{"role": "wizard", "content": "hi"}]}, "unknown role"),
        ({"model": MODEL, "messages": "hello"}, "messages"),
        ({"model": MODEL, "messages": FRANCE, "max_tokens": -1}, "max_tokens"),
        ({"model": MODEL, "messages": FRANCE, "temperature": "hot"}, "temperature"),
        ({"model": MODEL, "messages": [{"role": "user", "content": "word " * 9000}]}, "context length"),
        ({"model": MODEL, "messages": FRANCE, "n": 0}, "n"),
    ],
)
def test_bad_chat_input_is_a_400(client: OpenAI, server: EngineServer, body: dict, fragment: str) -> None:
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert fragment in error["message"] or fragment == error["param"]
    # ... and the server keeps serving.
    assert client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=30).choices


def test_bad_completion_input_is_a_400(server: EngineServer) -> None:
    for body in ({"model": MODEL}, {"model": MODEL, "prompt": ""}, {"model": MODEL, "prompt": "x", "max_tokens": -2}):
        reply = httpx.post(f"{server.url}/v1/completions", json=body, timeout=60)
        assert reply.status_code == 400, body
        assert "message" in reply.json()["error"]
    wrong_type = httpx.post(f"{server.url}/v1/completions", content=b"prompt=x", headers={"content-type": "text/plain"})
    assert wrong_type.status_code == 400
