"""CORS, --api-key and --enable-metrics against the real engine server on SmolLM2.

One server with ``--api-key K --enable-metrics`` (and a Vertex health route from the
environment, which must stay open like /health).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

from tests.support.engine_process import EngineServer, engine_server

pytestmark = pytest.mark.slow

MODEL = "smollm2"
KEY = "sk-test-key-123"
AUTH = {"Authorization": f"Bearer {KEY}"}
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
VERTEX_HEALTH = "/vertex/health"


@pytest.fixture(scope="module")
def server(
    smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory, serving_flags: tuple[str, ...]
) -> Iterator[EngineServer]:
    args = (
        "--served-model-name", MODEL, "--skip-server-warmup", "--max-total-tokens", "8192",
        "--api-key", KEY, "--enable-metrics", *serving_flags,
    )  # fmt: skip
    env = {"AIP_HEALTH_ROUTE": VERTEX_HEALTH}
    with engine_server(smollm2_dir, tmp_path_factory.mktemp("logs"), *args, env=env) as running:
        yield running


@pytest.fixture(scope="module")
def http(server: EngineServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


def _chat_body(max_tokens: int = 16) -> dict[str, object]:
    return {"model": MODEL, "messages": FRANCE, "temperature": 0, "max_tokens": max_tokens}


# ------------------------------------------------------------------ api key


def test_no_key_is_401_in_the_openai_shape(http: httpx.Client) -> None:
    for path in (
        "/v1/chat/completions",
        "/generate",
        "/v1/responses",
        "/invocations",
        "/vertex_generate",
    ):
        reply = http.post(path, json=_chat_body())
        assert reply.status_code == 401, (path, reply.text)
        error = reply.json()["error"]
        assert error["type"] == "authentication_error"
        assert error["code"] == "invalid_api_key"
        assert error["param"] is None
        assert error["message"]
    assert http.get("/v1/models").status_code == 401
    assert http.get("/server_info").status_code == 401
    assert http.get("/metrics").status_code == 401


def test_wrong_key_is_401(http: httpx.Client) -> None:
    for headers in (
        {"Authorization": "Bearer nope"},
        {"Authorization": KEY},
        {"x-api-key": "nope"},
    ):
        reply = http.post("/v1/chat/completions", json=_chat_body(), headers=headers)
        assert reply.status_code == 401, headers
        assert reply.json()["error"]["code"] == "invalid_api_key"


def test_no_key_is_401_in_the_anthropic_shape(http: httpx.Client) -> None:
    body = {"model": MODEL, "max_tokens": 8, "messages": FRANCE}
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        reply = http.post(path, json=body)
        assert reply.status_code == 401
        assert reply.json() == {
            "type": "error",
            "error": {"type": "authentication_error", "message": reply.json()["error"]["message"]},
        }


def test_the_anthropic_client_sees_an_authentication_error(server: EngineServer) -> None:
    client = anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0, timeout=30)
    with pytest.raises(anthropic.AuthenticationError) as err:
        client.messages.create(model=MODEL, max_tokens=8, messages=FRANCE)  # type: ignore[arg-type]
    assert err.value.status_code == 401
    assert err.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]


def test_no_key_is_401_in_the_ollama_shape(http: httpx.Client) -> None:
    for reply in (
        http.get("/api/tags"),
        http.post("/api/chat", json={"model": MODEL, "messages": FRANCE}),
    ):
        assert reply.status_code == 401
        body = reply.json()
        assert list(body) == ["error"]
        assert isinstance(body["error"], str) and body["error"]


def test_bearer_key_is_accepted(http: httpx.Client) -> None:
    reply = http.post("/v1/chat/completions", json=_chat_body(), headers=AUTH)
    assert reply.status_code == 200, reply.text
    assert "Paris" in reply.json()["choices"][0]["message"]["content"]
    assert http.get("/v1/models", headers=AUTH).status_code == 200
    assert http.get("/server_info", headers={"authorization": f"bearer {KEY}"}).status_code == 200


def test_x_api_key_header_is_accepted(http: httpx.Client) -> None:
    reply = http.get("/v1/models", headers={"x-api-key": KEY})
    assert reply.status_code == 200
    assert reply.json()["data"][0]["id"] == MODEL


def test_the_openai_client_with_the_key(server: EngineServer) -> None:
    client = OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=120)
    reply = client.chat.completions.create(
        model=MODEL, messages=FRANCE, temperature=0, max_tokens=16
    )  # type: ignore[arg-type]
    assert "Paris" in (reply.choices[0].message.content or "")
    streamed = client.chat.completions.create(
        model=MODEL,
        messages=FRANCE,  # type: ignore[arg-type]
        temperature=0,
        max_tokens=16,
        stream=True,
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in streamed if chunk.choices)
    assert text == reply.choices[0].message.content

    wrong = OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0, timeout=30)
    with pytest.raises(openai.AuthenticationError) as err:
        wrong.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=4)  # type: ignore[arg-type]
    assert err.value.code == "invalid_api_key"


def test_probes_are_open_without_a_key(http: httpx.Client) -> None:
    assert http.get("/health").status_code == 200
    assert http.get("/health_generate").status_code == 200
    assert http.get("/ping").status_code == 200
    assert http.get(VERTEX_HEALTH).status_code == 200


def test_cors_preflight_is_open_and_answered(http: httpx.Client) -> None:
    reply = http.options(
        "/v1/chat/completions",
        headers={
            "Origin": "http://localhost:5173",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert reply.status_code == 200
    assert reply.headers["access-control-allow-origin"] in ("*", "http://localhost:5173")
    assert "POST" in reply.headers["access-control-allow-methods"]
    assert "authorization" in reply.headers["access-control-allow-headers"].lower()


def test_cors_headers_on_answers_and_on_401s(http: httpx.Client) -> None:
    origin = {"Origin": "http://example.com"}
    ok = http.get("/v1/models", headers={**AUTH, **origin})
    denied = http.get("/v1/models", headers=origin)
    assert ok.status_code == 200 and denied.status_code == 401
    for reply in (ok, denied):
        assert reply.headers["access-control-allow-origin"] in ("*", "http://example.com")


# ------------------------------------------------------------------ metrics


def _scrape(http: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reply = http.get("/metrics", headers=AUTH)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    """The sum over samples named ``name`` whose labels include ``labels``."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]
    assert found, f"no sample {name} {labels}"
    return sum(found)


def test_metrics_count_requests_tokens_and_latencies(http: httpx.Client) -> None:
    before = _scrape(http)
    prompt_before = _value(before, "sglang:prompt_tokens_total")
    for _ in range(2):  # the same prompt twice: the second one hits the radix cache
        assert http.post("/v1/chat/completions", json=_chat_body(), headers=AUTH).status_code == 200
    streamed = http.post(
        "/generate",
        json={
            "text": "Once upon a time",
            "sampling_params": {"max_new_tokens": 8, "temperature": 0},
            "stream": True,
        },
        headers=AUTH,
    )
    assert streamed.status_code == 200
    assert http.get("/v1/models").status_code == 401

    after = _scrape(http)
    chat = {"route": "/v1/chat/completions", "method": "POST"}
    assert _value(after, "sglang:http_requests_total", status="200", **chat) >= 2
    assert _value(after, "sglang:http_requests_total", route="/v1/models", status="401") >= 1
    assert _value(after, "sglang:http_requests_total", route="/generate", status="200") >= 1
    assert _value(after, "sglang:prompt_tokens_total", model_name=MODEL) > prompt_before
    assert _value(after, "sglang:generation_tokens_total") >= 16 + 8
    assert _value(after, "sglang:cached_tokens_total") > 0
    assert _value(after, "sglang:num_requests_total") >= 3
    for histogram in (
        "sglang:time_to_first_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:e2e_request_latency_seconds",
    ):
        assert _value(after, f"{histogram}_count") > 0, histogram
        assert _value(after, f"{histogram}_sum") > 0, histogram
        assert _value(after, f"{histogram}_bucket", le="+Inf") == _value(
            after, f"{histogram}_count"
        )
    assert 0 < _value(after, "sglang:cache_hit_rate") <= 1
    assert _value(after, "sglang:num_running_reqs") == 0
    assert _value(after, "sglang:num_queue_reqs") == 0


def test_metrics_running_gauge_is_refreshed_at_scrape(http: httpx.Client) -> None:
    body = {
        "text": "Count: one, two, three,",
        "sampling_params": {"max_new_tokens": 2000, "temperature": 0, "ignore_eos": True},
        "stream": True,
    }
    with http.stream("POST", "/generate", json=body, headers=AUTH) as stream:
        lines = stream.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        running = _value(_scrape(http), "sglang:num_running_reqs")
    assert running == 1
    deadline = time.monotonic() + 30
    while _value(_scrape(http), "sglang:num_running_reqs") != 0:  # the close aborts it
        assert time.monotonic() < deadline, "the aborted request still runs"
        time.sleep(0.2)
