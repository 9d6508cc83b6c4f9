"""Every native route of the real server: generate (plain, batch, stream, logprobs), health,
model and server info, flush_cache, tokenize/detokenize, abort_request."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from transformers import PreTrainedTokenizerBase

pytestmark = pytest.mark.slow

FRANCE_ANSWER = "The capital of France is Paris."
GREEDY = {"temperature": 0, "max_new_tokens": 32}
MODEL_INFO_KEYS = {
    "model_path",
    "is_generation",
    "tokenizer_path",
    "preferred_sampling_params",
    "weight_version",
    "has_image_understanding",
    "has_audio_understanding",
    "model_type",
    "architectures",
    "embedding",
}


def test_generate_text(client: httpx.Client, france_prompt: str) -> None:
    reply = client.post("/generate", json={"text": france_prompt, "sampling_params": GREEDY})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["text"] == FRANCE_ANSWER
    meta = body["meta_info"]
    assert meta["finish_reason"] == {"type": "stop", "matched": 2}
    assert meta["completion_tokens"] == len(body["output_ids"])
    assert body["output_ids"][-1] == 2
    assert meta["prompt_tokens"] > 0
    assert {"id", "cached_tokens", "e2e_latency"} <= meta.keys()


def test_generate_input_ids(
    client: httpx.Client, france_prompt: str, smol_tokenizer: PreTrainedTokenizerBase
) -> None:
    ids = smol_tokenizer.encode(france_prompt)
    reply = client.post("/generate", json={"input_ids": ids, "sampling_params": GREEDY})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["text"] == FRANCE_ANSWER
    assert body["meta_info"]["prompt_tokens"] == len(ids)


def test_generate_batch_of_three(client: httpx.Client, france_prompt: str) -> None:
    reply = client.post("/generate", json={"text": [france_prompt] * 3, "sampling_params": GREEDY})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert isinstance(body, list) and len(body) == 3
    assert [item["text"] for item in body] == [FRANCE_ANSWER] * 3
    assert len({item["meta_info"]["id"] for item in body}) == 3


def test_generate_stream(
    client: httpx.Client,
    france_prompt: str,
    sse_payloads: Callable[..., Any],
) -> None:
    body = {"text": france_prompt, "sampling_params": GREEDY, "stream": True}
    with client.stream("POST", "/generate", json=body) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        payloads = list(sse_payloads(reply.iter_lines()))
    assert payloads[-1] == "[DONE]"
    chunks = [orjson.loads(p) for p in payloads[:-1]]
    assert chunks
    # The text is cumulative: each chunk extends the one before.
    for before, after in itertools.pairwise(chunks):
        assert after["text"].startswith(before["text"])
        assert after["meta_info"]["completion_tokens"] > before["meta_info"]["completion_tokens"]
        assert before["meta_info"]["finish_reason"] is None
    last = chunks[-1]
    assert last["text"] == FRANCE_ANSWER
    assert last["meta_info"]["finish_reason"] == {"type": "stop", "matched": 2}
    assert last["meta_info"]["completion_tokens"] == len(last["output_ids"])


def test_generate_return_logprob(client: httpx.Client, france_prompt: str) -> None:
    reply = client.post(
        "/generate", json={"text": france_prompt, "sampling_params": GREEDY, "return_logprob": True}
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    meta = body["meta_info"]
    logprobs = meta["output_token_logprobs"]
    assert len(logprobs) == meta["completion_tokens"] == len(body["output_ids"])
    assert [tok for _, tok, _ in logprobs] == body["output_ids"]
    assert all(lp <= 0.0 for lp, _, _ in logprobs)


def test_health_and_health_generate(client: httpx.Client) -> None:
    assert client.get("/health").status_code == 200
    assert client.get("/health_generate").status_code == 200


@pytest.mark.parametrize("route", ["/get_model_info", "/model_info"])
def test_model_info(client: httpx.Client, route: str, smollm2_dir: Any) -> None:
    reply = client.get(route)
    assert reply.status_code == 200
    info = reply.json()
    assert set(info) == MODEL_INFO_KEYS
    assert info["is_generation"] is True
    assert info["model_type"] == "llama"
    assert info["architectures"] == ["LlamaForCausalLM"]
    assert info["embedding"] is None
    assert info["preferred_sampling_params"] is None
    assert info["has_image_understanding"] is False
    assert info["has_audio_understanding"] is False
    assert isinstance(info["weight_version"], int)
    assert info["tokenizer_path"] == str(smollm2_dir)


def test_server_info(client: httpx.Client, wait_idle: Callable[..., dict[str, Any]]) -> None:
    info = wait_idle(client)
    assert info["max_total_tokens"] == 16384
    assert info["context_length"] == 8192
    assert info["kv_pool_free_tokens"] + info["kv_pool_used_tokens"] == 16384
    # NOTE: K and V of 30 layers x 3 KV heads x 64 dims in fp32, for 16,384 slots + the dummy one.
    assert info["kv_pool_bytes"] == (16384 + 1) * 2 * 30 * 3 * 64 * 4
    assert info["kv_pool_dtype"] == "float32"
    assert 0 <= info["radix_cache_evictable_tokens"] <= info["radix_cache_tokens"]
    assert info["num_running_reqs"] == 0 and info["num_waiting_reqs"] == 0
    assert isinstance(info["version"], str) and info["version"]
    assert info["api_key"] is None
    again = client.get("/get_server_info")
    assert again.status_code == 200 and again.json()["max_total_tokens"] == 16384


def test_flush_cache_idle_and_busy(
    client: httpx.Client,
    server: Any,
    wait_idle: Callable[..., dict[str, Any]],
    server_info: Callable[[httpx.Client], dict[str, Any]],
    sse_payloads: Callable[..., Any],
) -> None:
    wait_idle(client)
    reply = client.post("/flush_cache")
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"success": True, "message": "Cache flushed."}
    info = server_info(client)
    assert info["kv_pool_used_tokens"] == 0 and info["radix_cache_tokens"] == 0

    long_body = {
        "text": "Tell me a very long story.",
        "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True},
        "stream": True,
    }
    # A long streaming generate keeps the scheduler busy while its first chunk has arrived.
    with (
        server.client() as streamer,
        streamer.stream("POST", "/generate", json=long_body) as stream,
    ):
        assert stream.status_code == 200
        # NOTE: the iterator stays referenced: a discarded one closes the connection when
        # collected, which would abort the request before the flush.
        payloads = sse_payloads(stream.iter_lines())
        first = next(payloads)
        assert orjson.loads(first)["meta_info"]["finish_reason"] is None
        busy = client.post("/flush_cache", params={"timeout": 0})
        for _ in range(10):  # a 503 means one model step outlasted the ping timeout; retry
            if busy.status_code != 503:
                break
            busy = client.post("/flush_cache", params={"timeout": 0})
        assert busy.status_code == 400, busy.text
        assert "requests are running" in busy.json()["error"]["message"]
    # Leaving the stream disconnected the client, which aborts the request.
    wait_idle(client)
    assert client.post("/flush_cache").status_code == 200


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world!",
        "Crème brûlée à la française: é, è, ê",
        "你好，世界",
        "emoji 🎉🚀 end",
        "  spaces\n\ttabs  ",
    ],
)
def test_tokenize_detokenize_round_trip(client: httpx.Client, text: str) -> None:
    tokenized = client.post("/tokenize", json={"prompt": text, "add_special_tokens": False})
    assert tokenized.status_code == 200, tokenized.text
    body = tokenized.json()
    assert body["count"] == len(body["tokens"]) > 0
    assert body["max_model_len"] == 8192
    detokenized = client.post("/detokenize", json={"tokens": body["tokens"]})
    assert detokenized.status_code == 200, detokenized.text
    assert detokenized.json() == {"text": text}


def test_abort_request_route(client: httpx.Client) -> None:
    assert client.post("/abort_request", json={"rid": "no-such-request"}).json() == {
        "success": True
    }
    assert client.post("/abort_request", json={"abort_all": True}).json() == {"success": True}
    empty = client.post("/abort_request", json={})
    assert empty.status_code == 400
    assert empty.json()["error"]["message"]
