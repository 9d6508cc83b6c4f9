"""With ``--enable-http2`` (Granian), one HTTP/2 connection carries 64 concurrent streamed
chat completions, each answered whole (issue 29)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.engine.api.conftest import SERVED_NAME
from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

STREAMS = 64
MAX_TOKENS = 4


async def _stream_chat(client: httpx.AsyncClient, i: int) -> tuple[str, list[dict[str, Any]]]:
    body = {
        "model": SERVED_NAME,
        "messages": [{"role": "user", "content": f"Say the number {i}."}],
        "max_tokens": MAX_TOKENS,
        "stream": True,
    }
    async with client.stream("POST", "/v1/chat/completions", json=body) as reply:
        assert reply.status_code == 200, await reply.aread()
        lines = [line async for line in reply.aiter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]", lines
    return reply.http_version, [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


async def _all_on_one_connection(url: str) -> list[tuple[str, list[dict[str, Any]]]]:
    # NOTE: http1=False: HTTP/2 with prior knowledge (plain HTTP has no ALPN to upgrade by);
    # one connection in the pool, so every stream shares it.
    limits = httpx.Limits(max_connections=1)
    async with httpx.AsyncClient(
        base_url=url, http1=False, http2=True, limits=limits, timeout=300
    ) as client:
        return await asyncio.gather(*(_stream_chat(client, i) for i in range(STREAMS)))


def test_64_streams_share_one_http2_connection(
    server: EngineServer, serving_flags: tuple[str, ...]
) -> None:
    if "--enable-http2" not in serving_flags:
        pytest.skip("HTTP/2 is served with --enable-http2")
    answers = asyncio.run(_all_on_one_connection(server.url))
    assert [version for version, _ in answers] == ["HTTP/2"] * STREAMS
    for _, chunks in answers:
        finish = [c["choices"][0].get("finish_reason") for c in chunks if c["choices"]]
        assert finish[-1] in ("stop", "length"), chunks
        text = "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
        )
        assert text, chunks
