"""The official ollama client (and raw HTTP) against the real engine server on SmolLM2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import ollama
import orjson
import pytest
from transformers import AutoTokenizer

from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

MODEL = "smollm2"
QUESTION = "What is the capital of France?"
FRANCE = [{"role": "user", "content": QUESTION}]
GREEDY = {"temperature": 0}
DONE_STATS = (
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
)




@pytest.fixture(scope="module")
def client(server: EngineServer) -> ollama.Client:
    return ollama.Client(host=server.url, timeout=120)




def _post(server: EngineServer, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=120)


def test_root_answers_get_and_head(server: EngineServer) -> None:
    reply = httpx.get(server.url)
    assert reply.status_code == 200
    assert reply.text == "Ollama is running"
    assert reply.headers["content-type"].startswith("text/plain")
    head = httpx.head(server.url)
    assert head.status_code == 200
    assert head.content == b""


def test_version(server: EngineServer) -> None:
    reply = httpx.get(f"{server.url}/api/version")
    assert reply.status_code == 200
    assert isinstance(reply.json()["version"], str)


def test_chat_non_streamed_greedy(client: ollama.Client, server: EngineServer) -> None:
    reply = client.chat(model=MODEL, messages=FRANCE, options=GREEDY)
    assert reply.model == MODEL
    assert reply.message.role == "assistant"
    assert reply.message.content is not None and "Paris" in reply.message.content
    assert reply.done is True
    assert reply.done_reason == "stop"
    # The prompt is the chat-templated question; the completion counts the eos token too.
    assert reply.prompt_eval_count == 37
    assert reply.eval_count == server.token_count(reply.message.content) + 1
    assert reply.total_duration is not None and reply.prompt_eval_duration is not None
    assert reply.eval_duration is not None
    assert reply.total_duration >= reply.prompt_eval_duration + reply.eval_duration > 0


def test_chat_streamed_equals_non_streamed(client: ollama.Client) -> None:
    whole = client.chat(model=MODEL, messages=FRANCE, options=GREEDY)
    chunks = list(client.chat(model=MODEL, messages=FRANCE, options=GREEDY, stream=True))
    assert len(chunks) > 2
    *deltas, last = chunks
    assert all(c.done is False and c.message.role == "assistant" for c in deltas)
    assert "".join(c.message.content or "" for c in chunks) == whole.message.content
    assert last.done is True
    assert last.done_reason == "stop"
    assert last.message.content == ""
    assert last.eval_count == whole.eval_count
    assert last.prompt_eval_count == whole.prompt_eval_count


def test_chat_stream_is_ndjson_with_stats_on_the_last_line(server: EngineServer) -> None:
    body = {"model": MODEL, "messages": FRANCE, "options": GREEDY}  # stream defaults to true
    with httpx.stream("POST", f"{server.url}/api/chat", json=body, timeout=120) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"] == "application/x-ndjson"
        lines = [orjson.loads(line) for line in reply.iter_lines() if line]
    for line in lines[:-1]:
        assert set(line) == {"model", "created_at", "message", "done"}
        assert line["done"] is False
    last = lines[-1]
    assert last["done"] is True
    assert last["done_reason"] == "stop"
    assert all(isinstance(last[key], int) for key in DONE_STATS)
    assert last["created_at"].endswith("Z")


def test_generate_non_streamed_and_streamed(client: ollama.Client) -> None:
    whole = client.generate(model=MODEL, prompt=QUESTION, options=GREEDY)
    assert whole.response is not None and "Paris" in whole.response
    assert whole.done is True and whole.done_reason == "stop"
    assert whole.context is not None
    assert whole.prompt_eval_count is not None and whole.eval_count is not None
    assert len(whole.context) == whole.prompt_eval_count + whole.eval_count
    chunks = list(client.generate(model=MODEL, prompt=QUESTION, options=GREEDY, stream=True))
    assert all(c.done is False for c in chunks[:-1])
    assert chunks[-1].done is True and chunks[-1].eval_count == whole.eval_count
    assert "".join(c.response or "" for c in chunks) == whole.response


def test_generate_raw_and_context(client: ollama.Client, smollm2_dir: Path) -> None:
    first = client.generate(model=MODEL, prompt=QUESTION, options=GREEDY)
    templated = AutoTokenizer.from_pretrained(smollm2_dir).apply_chat_template(
        FRANCE, add_generation_prompt=True, tokenize=False
    )
    raw = client.generate(model=MODEL, prompt=templated, raw=True, options=GREEDY)
    assert raw.response == first.response
    assert raw.prompt_eval_count == first.prompt_eval_count
    assert raw.context is None  # Ollama returns no context in raw mode
    follow_up = client.generate(
        model=MODEL,
        prompt="And of Germany?",
        context=first.context,
        options={**GREEDY, "num_predict": 8},
    )
    assert follow_up.done is True
    assert first.context is not None and follow_up.prompt_eval_count is not None
    assert follow_up.prompt_eval_count > len(first.context)


def test_stop_option(client: ollama.Client) -> None:
    reply = client.chat(model=MODEL, messages=FRANCE, options={**GREEDY, "stop": ["Paris"]})
    assert reply.message.content is not None and "Paris" not in reply.message.content
    assert reply.message.content.startswith("The capital of France")
    assert reply.done_reason == "stop"


def test_seed_makes_sampling_reproducible(client: ollama.Client) -> None:
    options = {"temperature": 0.8, "seed": 1234, "num_predict": 12}
    prompt = "Write a short poem about the sea."
    first = client.generate(model=MODEL, prompt=prompt, options=options)
    second = client.generate(model=MODEL, prompt=prompt, options=options)
    assert first.response and first.response == second.response


def test_num_predict_caps_eval_count(client: ollama.Client) -> None:
    # think=False, keep_alive and load options such as num_ctx are accepted and ignored.
    reply = client.chat(
        model=MODEL,
        messages=FRANCE,
        options={**GREEDY, "num_predict": 3, "num_ctx": 4096},
        think=False,
        keep_alive="5m",
    )
    assert reply.eval_count == 3
    assert reply.done_reason == "length"
    unbounded = client.chat(model=MODEL, messages=FRANCE, options={**GREEDY, "num_predict": -1})
    assert unbounded.done_reason == "stop"


def test_load_calls_answer_done(client: ollama.Client) -> None:
    loaded = client.generate(model=MODEL)
    assert loaded.done is True and loaded.done_reason == "load" and loaded.response == ""
    chat_loaded = client.chat(model=MODEL, messages=[])
    assert chat_loaded.done is True and chat_loaded.done_reason == "load"


def test_tags_show_and_ps(client: ollama.Client, smollm2_dir: Path) -> None:
    weights = sum(p.stat().st_size for p in smollm2_dir.glob("*.safetensors"))
    (listed,) = client.list().models
    assert listed.model == MODEL
    assert listed.size == weights
    assert listed.digest is not None and len(listed.digest) == 64
    assert listed.modified_at is not None
    assert listed.details is not None
    assert listed.details.format == "safetensors"
    assert listed.details.family == "llama" and listed.details.families == ["llama"]
    assert listed.details.parameter_size is not None and listed.details.parameter_size.endswith("M")
    assert listed.details.quantization_level == "F32"

    for name in (MODEL, f"{MODEL}:latest"):
        shown = client.show(name)
        assert shown.details is not None and shown.details.family == "llama"
        assert shown.modelinfo is not None
        assert shown.modelinfo["general.architecture"] == "llama"
        assert shown.modelinfo["llama.context_length"] > 0
        assert shown.modelinfo["llama.block_count"] == 30
        assert shown.template is not None and "<|im_start|>" in shown.template
        assert shown.capabilities == ["completion"]
        assert shown.modified_at is not None

    (running,) = client.ps().models
    assert running.name == MODEL and running.size == weights
    assert running.size_vram in (0, weights)
    assert running.expires_at is not None


def test_unknown_model_is_404(client: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        client.chat(model="nope", messages=FRANCE)
    assert err.value.status_code == 404
    assert err.value.error == "model 'nope' not found, try pulling it first"
    with pytest.raises(ollama.ResponseError) as err:
        list(client.generate(model="nope", prompt="hi", stream=True))
    assert err.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as err:
        client.show("nope")
    assert err.value.status_code == 404
    assert err.value.error == "model 'nope' not found"


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/api/chat", {"messages": FRANCE}, "model"),
        ("/api/chat", {"model": MODEL, "messages": "hi"}, "messages"),
        ("/api/chat", {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}, "role"),
        (
            "/api/chat",
            {"model": MODEL, "messages": FRANCE, "options": {"temperature": "hot"}},
            "temperature",
        ),
        (
            "/api/chat",
            {"model": MODEL, "messages": FRANCE, "options": {"num_predict": -2}},
            "num_predict",
        ),
        ("/api/chat", {"model": MODEL, "messages": FRANCE, "options": {"top_p": 0}}, "top_p"),
        (
            "/api/chat",
            {"model": MODEL, "messages": FRANCE, "format": "xml"},
            'format must be "json" or a JSON schema',
        ),
        (
            "/api/chat",
            {
                "model": MODEL,
                "messages": FRANCE,
                "tools": [{"type": "function", "function": {"name": "f"}}],
            },
            "tool calling",
        ),
        ("/api/chat", {"model": MODEL, "messages": FRANCE, "think": True}, "thinking"),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "hi", "template": "{{ .Prompt }}"},
            "template",
        ),
        ("/api/generate", {"model": MODEL, "prompt": "hi", "context": [-1]}, "context"),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "hello " * 20000, "raw": True},
            "context length",
        ),
    ],
)
def test_bad_input_is_400_in_ollama_shape(
    server: EngineServer, path: str, body: dict[str, Any], message: str
) -> None:
    reply = _post(server, path, body)
    assert reply.status_code == 400, reply.text
    payload = reply.json()
    assert list(payload) == ["error"]
    assert message in payload["error"]


def test_broken_body_is_400_and_the_server_keeps_serving(
    client: ollama.Client, server: EngineServer
) -> None:
    for content in (b"{not json", b""):
        reply = httpx.post(f"{server.url}/api/chat", content=content)
        assert reply.status_code == 400
        assert isinstance(reply.json()["error"], str)
    with pytest.raises(ollama.ResponseError) as err:
        list(client.chat(model=MODEL, messages=FRANCE, stream=True, format={"type": "objec"}))
    assert err.value.status_code == 400
    assert "Paris" in (
        client.chat(model=MODEL, messages=FRANCE, options=GREEDY).message.content or ""
    )


def test_body_without_json_content_type_is_accepted(server: EngineServer) -> None:
    """Ollama's documented ``curl -d '{...}'`` sends application/x-www-form-urlencoded."""
    body = {"model": MODEL, "prompt": QUESTION, "stream": False, "options": GREEDY}
    reply = httpx.post(
        f"{server.url}/api/generate",
        content=orjson.dumps(body),
        headers={"content-type": "application/x-www-form-urlencoded"},
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    assert "Paris" in reply.json()["response"]
