"""Our engine behind the router under load and abandoned requests (issue 22, done-when).

(a) 300 streamed and 100 non-streamed chats cut off at seeded random moments through the
router: afterwards the engine runs nothing and holds no KV beyond its radix cache.
(b) 2,000 streamed chats at 256 concurrent, straight to the engine and through the router:
every one ends with ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.engine_stack import MODEL, Stack, engine_behind_router, post_bytes

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
SEED = 22
STREAMED_CUTS, WHOLE_CUTS = 300, 100
CUT_CONCURRENCY = 64
CUT_WITHIN_S = 1.5  # each client leaves at a uniform random moment in [0, this)
STREAMS, STREAM_CONCURRENCY = 2000, 256
STREAM_TOKENS = 4  # short answers: the load is in the connections, not the decoding


@pytest.fixture(scope="module")
def stack(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # NOTE: room for every stream at once, so none waits in the queue for a slot.
    args = ("--max-running-requests", str(STREAM_CONCURRENCY))
    with engine_behind_router(smollm2_dir, tmp_path_factory.mktemp("stress"), *args) as running:
        yield running


async def _cut_off(port: int, stream: bool, after_s: float, i: int) -> None:
    body = {"model": MODEL, "stream": stream, "max_tokens": 200, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"Tell story number {i}."}]}
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(post_bytes(port, CHAT, body))
    await writer.drain()
    await asyncio.sleep(after_s)
    writer.close()
    await writer.wait_closed()


async def _cut_offs(port: int) -> None:
    rng = random.Random(SEED)
    kinds = [True] * STREAMED_CUTS + [False] * WHOLE_CUTS
    rng.shuffle(kinds)
    gate = asyncio.Semaphore(CUT_CONCURRENCY)

    async def one(i: int, stream: bool) -> None:
        async with gate:
            await _cut_off(port, stream, rng.uniform(0, CUT_WITHIN_S), i)

    await asyncio.wait_for(asyncio.gather(*(one(i, s) for i, s in enumerate(kinds))), 300)


def test_cut_off_requests_leave_no_running_request_or_kv(stack: Stack) -> None:
    asyncio.run(_cut_offs(stack.router.port))
    load, waited = stack.wait_idle(timeout_s=10)
    assert load.idle, f"{waited:.1f} s after the last client left: {load}\n{stack.engine.log_tail()}"
    assert stack.running_gauge() == 0
    backends = stack.router.admin("GET", "/backends").json()["backends"]
    assert [b["inflight"] for b in backends] == [0]
    assert "Traceback" not in stack.engine.log_path.read_text(errors="replace")


async def _stream(client: httpx.AsyncClient, url: str, i: int) -> str | None:
    """None when the stream ended with [DONE]; else what went wrong."""
    body = {"model": MODEL, "stream": True, "max_tokens": STREAM_TOKENS, "temperature": 0,
            "messages": [{"role": "user", "content": f"Count to {i}."}]}
    try:
        async with client.stream("POST", url, json=body) as reply:
            data = b"".join([chunk async for chunk in reply.aiter_raw()])
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if reply.status_code != 200 or not data.endswith(b"data: [DONE]\n\n"):
        return f"{reply.status_code}: ...{data[-200:]!r}"
    return None


async def _streams(url: str) -> list[str]:
    limits = httpx.Limits(max_connections=STREAM_CONCURRENCY)
    gate = asyncio.Semaphore(STREAM_CONCURRENCY)

    async def one(client: httpx.AsyncClient, i: int) -> str | None:
        async with gate:
            return await _stream(client, url, i)

    async with httpx.AsyncClient(limits=limits, timeout=300) as client:
        results = await asyncio.wait_for(
            asyncio.gather(*(one(client, i) for i in range(STREAMS))), 600
        )
    return [r for r in results if r is not None]


@pytest.mark.parametrize("via", ["direct", "router"])
def test_2000_streams_at_256_concurrent_all_end_with_done(stack: Stack, via: str) -> None:
    base = stack.engine.url if via == "direct" else stack.router.url
    failed = asyncio.run(_streams(f"{base}{CHAT}"))
    assert not failed, f"{len(failed)} of {STREAMS} streams failed, e.g. {failed[:3]}"
    load, _ = stack.wait_idle(timeout_s=10)
    assert load.idle, load
