"""Dispatch by model name and alias, pass-through bytes, listings, balancing, errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.router.conftest import Proc, Router, start_echo, start_router, stop

CHAT = {"messages": [{"role": "user", "content": "one two three"}]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Router, Proc, Proc]]:
    log_dir = tmp_path_factory.mktemp("dispatch")
    procs: list[Proc] = []
    try:
        procs += [start_echo(log_dir, "echo-a"), start_echo(log_dir, "echo-b")]
        # NOTE: the replicas of echo-a share requests by load here; cache-aware routing (the
        # default) is tested in test_routing_policy.py and test_router_replicas.py.
        router = start_router(log_dir, "--routing-policy", "least_in_flight")
        procs.append(router)
        router.register(procs[0], "echo-a", id="a", kind="openai", aliases=["alias-a"])
        router.register(procs[1], "echo-b", id="b", kind="openai")
        yield router, procs[0], procs[1]
    finally:
        for proc in reversed(procs):
            stop(proc)


def _client(router: Router) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{router.url}/v1", api_key="any", max_retries=0, timeout=10)


def test_openai_client_routes_by_name_and_alias(setup: tuple[Router, Proc, Proc]) -> None:
    router, _, _ = setup
    client = _client(router)
    for model, served in (("echo-a", "echo-a"), ("alias-a", "echo-a"), ("echo-b", "echo-b")):
        reply = client.chat.completions.create(model=model, **CHAT)  # type: ignore[call-overload]
        assert reply.model == served and reply.choices[0].message.content == "one two three"
        stream = client.chat.completions.create(model=model, stream=True, **CHAT)  # type: ignore[call-overload]
        text = "".join(c.choices[0].delta.content or "" for c in stream)
        assert text == "one two three "


def test_stream_bytes_identical_to_direct(setup: tuple[Router, Proc, Proc]) -> None:
    router, echo_a, _ = setup
    body = {"model": "echo-a", "stream": True, "max_tokens": 50, **CHAT}
    direct = httpx.post(f"{echo_a.url}/v1/chat/completions", json=body, timeout=10)
    routed = httpx.post(f"{router.url}/v1/chat/completions", json=body, timeout=10)
    assert routed.status_code == direct.status_code == 200
    assert routed.headers["content-type"] == direct.headers["content-type"]
    assert routed.content == direct.content and direct.content.count(b"data: ") == 52


def test_listings_are_the_union(setup: tuple[Router, Proc, Proc]) -> None:
    router, _, _ = setup
    models = _client(router).models.list().data
    assert [(m.id, m.owned_by) for m in models] == [("echo-a", "echo-org"), ("echo-b", "echo-org")]
    assert _client(router).models.retrieve("alias-a").id == "echo-a"
    tags = httpx.get(f"{router.url}/api/tags", timeout=10).json()["models"]
    assert [(t["name"], t["model"]) for t in tags] == [("echo-a", "echo-a"), ("echo-b", "echo-b")]
    assert {"modified_at", "size", "digest", "details"} <= set(tags[0])


@pytest.mark.parametrize(
    ("path", "content", "status", "code"),
    [
        ("/v1/chat/completions", b'{"model": "nope", "messages": []}', 404, "model_not_found"),
        ("/v1/chat/completions", b"{not json", 400, "invalid_json"),
        ("/v1/chat/completions", b"[1, 2]", 400, "invalid_json"),
        ("/v1/chat/completions", b'{"messages": []}', 400, "missing_model"),
        ("/v1/messages", b'{"model": "echo-a", "messages": []}', 400, "unsupported_api"),
        ("/api/chat", b'{"model": "echo-b", "messages": []}', 400, "unsupported_api"),
        ("/v1/nothing", b"{}", 404, "not_found"),
    ],
)
def test_bad_input_gets_openai_shaped_4xx(
    setup: tuple[Router, Proc, Proc], path: str, content: bytes, status: int, code: str
) -> None:
    router, _, _ = setup
    reply = httpx.post(f"{router.url}{path}", content=content, timeout=10)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code and set(error) == {"message", "type", "param", "code"}
    if code == "model_not_found":
        assert "echo-a, echo-b" in error["message"]


def test_body_over_the_limit_is_413(setup: tuple[Router, Proc, Proc]) -> None:
    router, _, _ = setup
    big = b'{"model": "echo-a", "pad": "' + b"x" * (32 * 1024 * 1024) + b'"}'
    reply = httpx.post(f"{router.url}/v1/chat/completions", content=big, timeout=30)
    assert reply.status_code == 413 and reply.json()["error"]["code"] == "request_too_large"


def test_least_outstanding_requests(setup: tuple[Router, Proc, Proc], tmp_path: Path) -> None:
    router, echo_a, _ = setup
    second = start_echo(tmp_path, "echo-a")
    try:
        router.register(second, "echo-a", id="a2", kind="openai")
        slow = {"model": "echo-a", "stream": True, "max_tokens": 20, **CHAT}
        headers = {"x-echo-delay-ms": "100"}
        holders = [
            threading.Thread(
                target=httpx.post,
                args=(f"{router.url}/v1/chat/completions",),
                kwargs={"json": slow, "headers": headers, "timeout": 30},
            )
            for _ in range(2)
        ]
        for holder in holders:
            holder.start()
            time.sleep(0.3)  # NOTE: the first request is counted before the second is picked
        opened = [httpx.get(f"{p.url}/stats", timeout=10).json()["open"] for p in (echo_a, second)]
        assert opened == [1, 1]
        for holder in holders:
            holder.join(30)
    finally:
        router.admin("DELETE", "/backends/a2")
        stop(second)


def test_api_keys_and_metrics(tmp_path: Path, setup: tuple[Router, Proc, Proc]) -> None:
    _, echo_a, _ = setup
    keyed = start_router(tmp_path, "--api-key", "k1", "--cors-origin", "http://ui.local")
    try:
        keyed.register(echo_a, "echo-a", kind="openai", api_key="upstream-key")
        body = {"model": "echo-a", **CHAT}
        url = f"{keyed.url}/v1/chat/completions"
        assert httpx.post(url, json=body, timeout=10).status_code == 401
        assert (
            httpx.post(
                url, json=body, headers={"authorization": "Bearer k2"}, timeout=10
            ).status_code
            == 401
        )
        assert (
            httpx.post(
                url, json=body, headers={"authorization": "Bearer k1"}, timeout=10
            ).status_code
            == 200
        )
        assert (
            httpx.post(url, json=body, headers={"x-api-key": "k1"}, timeout=10).status_code == 200
        )
        # NOTE: the client's key is the router's; upstream goes the backend's own, alone.
        seen = httpx.get(f"{echo_a.url}/stats", timeout=10).json()["credentials"]
        assert seen == {"authorization": ["Bearer upstream-key"], "x-api-key": []}
        preflight = httpx.options(
            url,
            timeout=10,
            headers={"origin": "http://ui.local", "access-control-request-method": "POST"},
        )
        assert preflight.headers["access-control-allow-origin"] == "http://ui.local"
        metrics = httpx.get(f"{keyed.url}/metrics", timeout=10).text
        assert (
            'gomgr_router_requests_total{route="/v1/chat/completions",status="200"} 2.0' in metrics
        )
        assert "gomgr_router_inflight_requests" in metrics
    finally:
        stop(keyed)
