"""Drives a server: a fixed list of requests at a set concurrency, or chats turn by turn."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from bench.serving.client import Result, send
from bench.serving.workload import Conversation, Request

TIMEOUT_S = 900.0


def _client(url: str, concurrency: int) -> httpx.AsyncClient:
    # NOTE: a fresh connection per request (no keep-alive): llama-server (cpp-httplib) closes an
    # idle kept-alive connection after 5 s, and on a loaded machine the next request raced that
    # close and failed with "Server disconnected without sending a response". A local connect
    # costs well under a millisecond, against requests of seconds, and every system pays it.
    limits = httpx.Limits(max_connections=concurrency + 1, max_keepalive_connections=0)
    return httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S, limits=limits)


async def run_requests(
    url: str,
    model: str,
    requests: list[Request],
    concurrency: int,
    extra: dict[str, Any],
    client: httpx.AsyncClient | None = None,
) -> tuple[list[Result], float]:
    """At most `concurrency` requests in flight, the next sent as soon as one finishes; on
    `client` (closed after) when given, else on a fresh connection per request."""
    slots = asyncio.Semaphore(concurrency)

    async def one(client: httpx.AsyncClient, request: Request) -> Result:
        async with slots:
            return await send(client, request, model, extra)

    async with client or _client(url, concurrency) as used:
        started = time.perf_counter()
        results = await asyncio.gather(*(one(used, r) for r in requests))
        return list(results), time.perf_counter() - started


async def run_conversations(
    url: str, model: str, chats: list[Conversation], extra: dict[str, Any]
) -> tuple[list[Result], float]:
    """All chats at once; within a chat each turn waits for the previous answer, which joins
    the history. Results are tagged `turn N`."""

    async def chat(client: httpx.AsyncClient, conversation: Conversation) -> list[Result]:
        history: list[tuple[str, str]] = []
        results: list[Result] = []
        for turn, user in enumerate(conversation.user_turns):
            history.append(("user", user))
            result = await send(
                client, conversation.request(history), model, extra, tag=f"turn {turn + 1}"
            )
            results.append(result)
            if not result.ok:
                break
            history.append(("assistant", result.text))
        return results

    async with _client(url, len(chats)) as client:
        started = time.perf_counter()
        per_chat = await asyncio.gather(*(chat(client, c) for c in chats))
        return [r for results in per_chat for r in results], time.perf_counter() - started
