"""Aborts free everything: by rid through /abort_request, and by the client disconnecting."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest

pytestmark = pytest.mark.slow

LONG_PARAMS = {"max_new_tokens": 2000, "ignore_eos": True}


@pytest.fixture()
def clean_after(client: httpx.Client) -> Iterator[None]:
    """Aborts anything a failed test left running, so the shared server is not kept busy."""
    yield
    client.post("/abort_request", json={"abort_all": True})


def wait_running(
    client: httpx.Client,
    server_info: Callable[[httpx.Client], dict[str, Any]],
    timeout_s: float = 60.0,
) -> None:
    """Until the scheduler reports a running request (so an abort cannot overtake it)."""
    deadline = time.monotonic() + timeout_s
    while server_info(client)["num_running_reqs"] < 1:
        assert time.monotonic() < deadline, "the request never started running"
        time.sleep(0.1)


def assert_all_freed(
    client: httpx.Client,
    wait_idle: Callable[..., dict[str, Any]],
    server_info: Callable[[httpx.Client], dict[str, Any]],
) -> None:
    info = wait_idle(client)
    assert info["kv_pool_used_tokens"] == info["radix_cache_tokens"]
    reply = client.post("/flush_cache")
    assert reply.status_code == 200, reply.text
    info = server_info(client)
    assert info["kv_pool_used_tokens"] == 0
    assert info["kv_pool_free_tokens"] == info["max_total_tokens"]


def test_abort_by_rid(
    client: httpx.Client,
    server: Any,
    wait_idle: Callable[..., dict[str, Any]],
    server_info: Callable[[httpx.Client], dict[str, Any]],
    clean_after: None,
) -> None:
    rid = f"abort-me-{uuid.uuid4().hex}"
    result: dict[str, Any] = {}

    def long_generate() -> None:
        with server.client(timeout_s=120.0) as own:
            reply = own.post(
                "/generate",
                json={"text": "Count to ten thousand:", "sampling_params": LONG_PARAMS, "rid": rid},
            )
            result["status"], result["body"] = reply.status_code, reply.json()

    worker = threading.Thread(target=long_generate, daemon=True)
    worker.start()
    wait_running(client, server_info)
    reply = client.post("/abort_request", json={"rid": rid})
    assert reply.status_code == 200 and reply.json() == {"success": True}
    worker.join(60.0)
    assert not worker.is_alive(), "the aborted generate did not return"
    assert result["status"] == 200, result
    meta = result["body"]["meta_info"]
    assert meta["id"] == rid
    assert meta["finish_reason"]["type"] == "abort"
    assert meta["completion_tokens"] < 2000
    assert_all_freed(client, wait_idle, server_info)


def test_abort_by_client_disconnect(
    client: httpx.Client,
    server: Any,
    wait_idle: Callable[..., dict[str, Any]],
    server_info: Callable[[httpx.Client], dict[str, Any]],
    sse_payloads: Callable[..., Any],
    clean_after: None,
) -> None:
    body = {"text": "Count to ten thousand:", "sampling_params": LONG_PARAMS, "stream": True}
    with server.client() as own, own.stream("POST", "/generate", json=body) as stream:
        assert stream.status_code == 200
        chunks = []
        for payload in sse_payloads(stream.iter_lines()):
            chunks.append(orjson.loads(payload))
            if len(chunks) == 2:
                break
    # The connection is closed here, mid-stream.
    assert [c["meta_info"]["finish_reason"] for c in chunks] == [None, None]
    assert_all_freed(client, wait_idle, server_info)
