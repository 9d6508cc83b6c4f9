"""200 concurrent streaming clients through the router, all complete and correct."""

from __future__ import annotations

import asyncio

import httpx

from tests.router.conftest import Proc, Router

CLIENTS = 200
CHUNKS = 20


async def _one(client: httpx.AsyncClient, url: str, i: int) -> bytes:
    body = {"model": "echo-model", "stream": True, "max_tokens": CHUNKS,
            "messages": [{"role": "user", "content": f"client {i}"}]}
    async with client.stream("POST", url, json=body, headers={"x-echo-delay-ms": "5"}) as reply:
        assert reply.status_code == 200
        return b"".join([chunk async for chunk in reply.aiter_raw()])


async def _all(url: str) -> list[bytes]:
    limits = httpx.Limits(max_connections=CLIENTS)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        return await asyncio.wait_for(
            asyncio.gather(*(_one(client, url, i) for i in range(CLIENTS))), timeout=120
        )


def test_200_concurrent_streams(router: Router, echo: Proc) -> None:
    router.register(echo, "echo-model", kind="openai")
    bodies = asyncio.run(_all(f"{router.url}/v1/chat/completions"))
    for i, body in enumerate(bodies):
        assert body.count(b"data: ") == CHUNKS + 2 and body.endswith(b"data: [DONE]\n\n")
        assert b'"client "' in body and f'"{i} "'.encode() in body
    assert httpx.get(f"{router.url}/admin/backends", timeout=10,
                     headers={"authorization": f"Bearer {router.token}"}).json()["backends"][0]["inflight"] == 0
