"""64 concurrent streaming /generate requests, with /health answering throughout."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

pytestmark = pytest.mark.slow

N_REQUESTS = 64
MAX_NEW_TOKENS = 16
TOPICS = ["the sea", "a cat", "Paris", "winter", "robots", "bread", "music", "the moon"]


async def stream_one(client: httpx.AsyncClient, prompt: str) -> list[dict[str, Any]]:
    body = {
        "text": prompt,
        "sampling_params": {
            "max_new_tokens": MAX_NEW_TOKENS,
            "ignore_eos": True,
            "temperature": 0.7,
        },
        "stream": True,
    }
    chunks: list[dict[str, Any]] = []
    async with client.stream("POST", "/generate", json=body) as reply:
        assert reply.status_code == 200
        done = False
        async for line in reply.aiter_lines():
            if not line:
                continue
            assert line.startswith("data: ") and not done, line
            payload = line.removeprefix("data: ")
            if payload == "[DONE]":
                done = True
            else:
                chunks.append(orjson.loads(payload))
        assert done, "the stream did not end with [DONE]"
    return chunks


async def poll_health(client: httpx.AsyncClient, stop: asyncio.Event) -> list[int]:
    statuses = []
    while not stop.is_set():
        statuses.append((await client.get("/health")).status_code)
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass
    return statuses


async def run_all(url: str) -> tuple[list[list[dict[str, Any]]], list[int]]:
    limits = httpx.Limits(max_connections=N_REQUESTS + 4)
    async with (
        httpx.AsyncClient(base_url=url, timeout=300.0, limits=limits) as client,
        httpx.AsyncClient(base_url=url, timeout=60.0) as health_client,
    ):
        stop = asyncio.Event()
        health = asyncio.create_task(poll_health(health_client, stop))
        prompts = [
            f"Write one sentence about {TOPICS[i % len(TOPICS)]} (#{i})." for i in range(N_REQUESTS)
        ]
        try:
            results = await asyncio.wait_for(
                asyncio.gather(*(stream_one(client, p) for p in prompts)), timeout=600.0
            )
        finally:
            stop.set()
        return list(results), await health


def test_64_concurrent_streams_with_health(
    server: Any, client: httpx.Client, wait_idle: Callable[..., dict[str, Any]]
) -> None:
    results, health = asyncio.run(run_all(server.url))
    assert len(results) == N_REQUESTS
    for chunks in results:
        assert 1 <= len(chunks) <= MAX_NEW_TOKENS
        counts = [c["meta_info"]["completion_tokens"] for c in chunks]
        assert counts == sorted(set(counts)), counts  # strictly increasing
        for chunk in chunks:
            assert len(chunk["output_ids"]) == chunk["meta_info"]["completion_tokens"]
        for before, after in itertools.pairwise(chunks):
            assert after["text"].startswith(before["text"])
        assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
        last = chunks[-1]
        assert last["meta_info"]["completion_tokens"] == MAX_NEW_TOKENS
        assert last["meta_info"]["finish_reason"] == {"type": "length", "length": MAX_NEW_TOKENS}
    assert len({c[-1]["meta_info"]["id"] for c in results}) == N_REQUESTS
    assert health, "/health was never polled during the run"
    assert set(health) == {200}, health
    wait_idle(client)
