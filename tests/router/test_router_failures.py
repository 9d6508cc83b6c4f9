"""Upstream deaths and client disconnects: clean errors, no hangs, no dangling routes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.router.conftest import Proc, Router, start_echo

CHAT = {"messages": [{"role": "user", "content": "one two three"}]}


def _wait_for(predicate: Callable[[], bool], timeout_s: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s")


def _models(router: Router) -> list[str]:
    return [m["id"] for m in httpx.get(f"{router.url}/v1/models", timeout=5).json()["data"]]


def _upstream_cancelled(echo: Proc) -> bool:
    stats = httpx.get(f"{echo.url}/stats", timeout=5).json()
    return bool(stats["cancelled"] == 1 and stats["open"] == 0)


def test_killed_upstream_is_gone_within_2s(router: Router, echo: Proc) -> None:
    router.register(echo, "echo-model", kind="openai")
    assert _models(router) == ["echo-model"]
    echo.kill9()
    _wait_for(lambda: _models(router) == [], 2.0)
    reply = httpx.post(f"{router.url}/v1/chat/completions", json={"model": "echo-model", **CHAT}, timeout=5)
    assert reply.status_code == 404 and reply.json()["error"]["code"] == "model_not_found"


def test_upstream_killed_mid_stream_ends_with_an_sse_error(router: Router, echo: Proc) -> None:
    router.register(echo, "echo-model", kind="openai")
    body = {"model": "echo-model", "stream": True, "max_tokens": 1000, **CHAT}
    events: list[str] = []
    started = time.monotonic()
    with httpx.stream("POST", f"{router.url}/v1/chat/completions", json=body, timeout=10,
                      headers={"x-echo-delay-ms": "50"}) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():  # NOTE: bounded: the read timeout, and the kill below
            if line.startswith("data: "):
                events.append(line.removeprefix("data: "))
                if len(events) == 3:
                    echo.kill9()
    assert time.monotonic() - started < 10
    error = json.loads(events[-1])["error"]
    assert error["code"] == "bad_gateway" and set(error) == {"message", "type", "param", "code"}
    assert 3 <= len(events) < 1000


def test_dead_backend_before_a_request_gets_a_clean_404(router: Router, log_dir: Path) -> None:
    echo = start_echo(log_dir)
    router.register(echo, "echo-model", kind="openai")
    # NOTE: killed between health probes, the request itself finds the port closed.
    echo.kill9()
    reply = httpx.post(f"{router.url}/v1/chat/completions", json={"model": "echo-model", **CHAT}, timeout=5)
    assert reply.status_code in (404, 502)
    assert reply.json()["error"]["code"] in ("model_not_found", "bad_gateway")


def test_client_disconnect_closes_the_upstream_request(router: Router, echo: Proc) -> None:
    router.register(echo, "echo-model", kind="openai")
    body = {"model": "echo-model", "stream": True, "max_tokens": 1000, **CHAT}
    with httpx.stream("POST", f"{router.url}/v1/chat/completions", json=body, timeout=10,
                      headers={"x-echo-delay-ms": "50"}) as reply:
        next(reply.iter_lines())
    _wait_for(lambda: _upstream_cancelled(echo), 5.0)


def test_client_disconnect_before_headers_closes_the_upstream_request(router: Router, echo: Proc) -> None:
    router.register(echo, "echo-model", kind="openai")
    body = {"model": "echo-model", "stream": True, "max_tokens": 1000, **CHAT}

    def impatient() -> None:
        try:
            httpx.post(f"{router.url}/v1/chat/completions", json=body, timeout=1.0,
                       headers={"x-echo-delay-ms": "5000"})
        except httpx.ReadTimeout:
            pass

    # NOTE: the echo server sends its first chunk at once; what is cut here is a stream
    # waiting 5 s between chunks, the shape of an engine busy with a long prefill.
    thread = threading.Thread(target=impatient)
    thread.start()
    thread.join(10)
    _wait_for(lambda: _upstream_cancelled(echo), 5.0)
