"""Our engine on SmolLM2 and an echo server behind one router, driven by the openai client."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.router.conftest import Proc, Router, start_echo, start_router, stop
from tests.support.engine_process import EngineServer, engine_server

pytestmark = pytest.mark.slow

MODEL = "smollm2"
GREEDY = {"max_tokens": 6, "temperature": 0, "messages": [{"role": "user", "content": "Say hi"}]}
_VOLATILE = re.compile(rb'"(id|created|system_fingerprint)":("[^"]*"|\d+)')


@pytest.fixture(scope="module")
def stack(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Router, EngineServer, Proc]]:
    log_dir = tmp_path_factory.mktemp("router-engine")
    with engine_server(smollm2_dir, log_dir, "--served-model-name", MODEL, "--skip-server-warmup") as engine:
        echo = start_echo(log_dir)
        router: Router | None = None
        try:
            router = start_router(log_dir)
            router.register(engine.url, MODEL, id="engine", aliases=["small"])
            router.register(echo, "echo-model", id="echo", kind="openai")
            yield router, engine, echo
        finally:
            for proc in (router, echo):
                if proc is not None:
                    stop(proc)


def test_models_union_with_owned_by_as_reported(stack: tuple[Router, EngineServer, Proc]) -> None:
    router, _, _ = stack
    client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="any", max_retries=0)
    assert [(m.id, m.owned_by) for m in client.models.list().data] == [(MODEL, "gomgr"), ("echo-model", "echo-org")]
    assert router.admin("GET", "/backends").json()["backends"][0]["max_model_len"] > 0


def test_routing_by_name_and_alias_matches_direct(stack: tuple[Router, EngineServer, Proc]) -> None:
    router, engine, _ = stack
    direct = openai.OpenAI(base_url=f"{engine.url}/v1", api_key="any", max_retries=0, timeout=120)
    routed = openai.OpenAI(base_url=f"{router.url}/v1", api_key="any", max_retries=0, timeout=120)
    expected = direct.chat.completions.create(model=MODEL, **GREEDY).choices[0].message.content  # type: ignore[call-overload]
    assert expected
    for name in (MODEL, "small"):
        reply = routed.chat.completions.create(model=name, **GREEDY)  # type: ignore[call-overload]
        assert reply.model == MODEL and reply.choices[0].message.content == expected
    echoed = routed.chat.completions.create(model="echo-model", messages=[{"role": "user", "content": "x y"}])
    assert echoed.choices[0].message.content == "x y"


def test_engine_stream_same_bytes_but_ids(stack: tuple[Router, EngineServer, Proc]) -> None:
    router, engine, _ = stack
    body = {"model": MODEL, "stream": True, **GREEDY}
    direct = httpx.post(f"{engine.url}/v1/chat/completions", json=body, timeout=120)
    routed = httpx.post(f"{router.url}/v1/chat/completions", json=body, timeout=120)
    assert routed.status_code == direct.status_code == 200
    assert routed.headers["content-type"] == direct.headers["content-type"]
    assert _VOLATILE.sub(b"", routed.content) == _VOLATILE.sub(b"", direct.content)
    assert routed.content.endswith(b"data: [DONE]\n\n")


def test_ollama_and_anthropic_routes(stack: tuple[Router, EngineServer, Proc]) -> None:
    router, _, _ = stack
    chat = httpx.post(f"{router.url}/api/chat", timeout=120, json={
        "model": "small", "stream": False, "options": {"num_predict": 4, "temperature": 0},
        "messages": [{"role": "user", "content": "Say hi"}]})
    assert chat.status_code == 200, chat.text
    assert chat.json()["model"] == MODEL and chat.json()["done"] is True
    streamed = httpx.post(f"{router.url}/api/generate", timeout=120, json={
        "model": MODEL, "prompt": "Hi", "options": {"num_predict": 4, "temperature": 0}})
    assert streamed.status_code == 200 and json.loads(streamed.text.splitlines()[-1])["done"] is True
    message = httpx.post(f"{router.url}/v1/messages", timeout=120, json={
        "model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]})
    assert message.status_code == 200 and message.json()["type"] == "message"
    tags = httpx.get(f"{router.url}/api/tags", timeout=10).json()["models"]
    assert [t["name"] for t in tags] == [MODEL, "echo-model"]


def test_killed_engine_is_gone_within_2s(stack: tuple[Router, EngineServer, Proc]) -> None:
    router, engine, _ = stack
    engine.process.kill()
    engine.process.wait(10)
    started = time.monotonic()
    models: list[str] = [MODEL]
    while MODEL in models and time.monotonic() - started < 2.0:
        models = [m["id"] for m in httpx.get(f"{router.url}/v1/models", timeout=5).json()["data"]]
        time.sleep(0.05)
    assert models == ["echo-model"]
    reply = httpx.post(f"{router.url}/v1/chat/completions", json={"model": "small", **GREEDY}, timeout=5)
    assert reply.status_code == 404 and "echo-model" in reply.json()["error"]["message"]
