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

import h11
import orjson
import pytest

from tests.support.engine_stack import MODEL, Stack, engine_behind_router, post_bytes
from tests.support.h11_connection import Connection

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
SEED = 22
STREAMED_CUTS, WHOLE_CUTS = 300, 100
CUT_CONCURRENCY = 64
CUT_WITHIN_S = 1.5  # each client leaves at a uniform random moment in [0, this)
STREAMS, STREAM_CONCURRENCY = 2000, 256
# NOTE: the load is in the connections, not the model. One prompt for every stream: after the
# first, each prefill is a radix-cache hit, which halved the engine's CPU for this test. Two
# tokens: one from the prefill, one from a decode step, so each stream also passes through the
# running batch.
STREAM_PROMPT = [{"role": "user", "content": "Count to three."}]
STREAM_TOKENS = 2


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


STREAM_BODY = orjson.dumps(
    {"model": MODEL, "stream": True, "max_tokens": STREAM_TOKENS, "temperature": 0, "messages": STREAM_PROMPT}
)


async def _stream(connection: Connection) -> str | None:
    """None when the stream's response was 200, complete and ended with [DONE]; else what
    went wrong."""
    status, data = await connection.post(CHAT, STREAM_BODY)
    if status != 200 or not data.endswith(b"data: [DONE]\n\n"):
        return f"{status}: ...{data[-200:]!r}"
    return None


async def _streams(port: int) -> list[str]:
    """STREAMS streams from STREAM_CONCURRENCY clients, each on its own keep-alive
    connection, starting the next stream as it finishes one.

    NOTE: h11 on asyncio's streams rather than httpx: at this concurrency httpx's connection
    pool spent more CPU than the server under test. h11 still checks every response's framing
    (a connection closed mid-stream is an error, not a short body).
    """
    left = iter(range(STREAMS))
    failed: list[str] = []

    async def client() -> None:
        connection = Connection(port)
        try:
            for _ in left:
                try:
                    problem = await _stream(connection)
                except (OSError, h11.ProtocolError) as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                    await connection.close()
                if problem is not None:
                    failed.append(problem)
        finally:
            await connection.close()

    await asyncio.wait_for(asyncio.gather(*(client() for _ in range(STREAM_CONCURRENCY))), 600)
    return failed


@pytest.mark.parametrize("via", ["direct", "router"])
def test_2000_streams_at_256_concurrent_all_end_with_done(stack: Stack, via: str) -> None:
    port = stack.engine.port if via == "direct" else stack.router.port
    failed = asyncio.run(_streams(port))
    assert not failed, f"{len(failed)} of {STREAMS} streams failed, e.g. {failed[:3]}"
    load, _ = stack.wait_idle(timeout_s=10)
    assert load.idle, load
