"""Kept-alive connections on both sides of the router (issue 22, item 5).

Client side: an idle connection outlives httpx's pool expiry (5 s), so the client, not the
router, closes it. Upstream side: a pooled connection the backend closes just as the router
sends on it (the backend's keep-alive timeout racing the reuse) is not a 502: the request
never reached the backend, so the router sends it again on a fresh connection.
"""

from __future__ import annotations

import asyncio
import http.client
import threading
import time
from collections.abc import Iterator
from typing import Self

import httpx
import orjson
import pytest

from tests.router.conftest import Proc, Router
from tests.support.engine_process import free_port

HTTPX_KEEPALIVE_EXPIRY_S = 5.0
MODEL = "racy-model"


def test_client_connection_idle_past_the_pool_expiry_still_serves(
    router: Router, echo: Proc
) -> None:
    router.register(echo, "echo-model", kind="openai")
    body = orjson.dumps({"model": "echo-model", "messages": [{"role": "user", "content": "hi"}]})
    headers = {"content-type": "application/json"}
    # NOTE: http.client keeps its one socket and never reconnects behind the test's back.
    conn = http.client.HTTPConnection("127.0.0.1", router.port, timeout=10)
    try:
        for pause_s in (0.0, HTTPX_KEEPALIVE_EXPIRY_S + 1):
            time.sleep(pause_s)
            conn.request("POST", "/v1/chat/completions", body, headers)
            reply = conn.getresponse()
            assert reply.status == 200 and b'"hi"' in reply.read()
    finally:
        conn.close()


class RacyBackend:
    """Answers the first POST on each connection, keeps it alive, and closes it without an
    answer when the next POST comes: a keep-alive timeout that fired as the request arrived.
    GETs (the router's health checks) are always answered."""

    def __init__(self) -> None:
        self.port = free_port()
        self.posts_answered = 0
        self.posts_dropped = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shut(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port)
        )
        self._ready.set()
        self._loop.run_forever()

    async def _shut(self) -> None:
        self._server.close()
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        posts = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method = head.split(b" ", 1)[0]
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                if method == b"POST":
                    posts += 1
                    if posts > 1:
                        self.posts_dropped += 1
                        return
                    self.posts_answered += 1
                    payload = {"object": "chat.completion", "model": MODEL, "choices": []}
                elif head.startswith(b"GET /v1/models"):
                    payload = {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
                else:
                    payload = {}
                data = orjson.dumps(payload)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(data)}\r\n\r\n".encode() + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
def racy() -> Iterator[RacyBackend]:
    with RacyBackend() as backend:
        yield backend


def test_pooled_connection_closed_by_the_backend_as_reused_is_retried(
    router: Router, racy: RacyBackend
) -> None:
    router.register(racy.url, MODEL, kind="openai")
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=router.url, timeout=10) as client:
        replies = [client.post("/v1/chat/completions", json=body) for _ in range(3)]
    assert [r.status_code for r in replies] == [200, 200, 200], replies[-1].text
    assert racy.posts_dropped >= 1 and racy.posts_answered == 3
