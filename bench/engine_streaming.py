"""Streaming chunk rate through the real engine server, beside the in-process engine.

Meanwhile /health is polled every 50 ms and its latency reported: it must keep answering
while many streams run (issue: 64 concurrent streams).

    python -m bench.engine_streaming [--concurrency 1,8] [--new-tokens 64]

The same greedy, ignore_eos requests run through the offline ``Engine`` (no HTTP, no IPC)
and through ``python -m engine.launch_server`` as streamed /v1/chat/completions; the ratio
server chunks/s ÷ offline tokens/s is what the three-process pipeline and the SSE path cost.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from engine.engine import Engine
from manager.models.pull import pull_model
from tests.support.engine_process import engine_server

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _questions(n: int) -> list[str]:
    return [f"Write a long story about a lighthouse number {i}." for i in range(n)]


async def _stream_one(client: httpx.AsyncClient, question: str, new_tokens: int) -> int:
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": question}],
        "temperature": 0,
        "max_tokens": new_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    chunks = 0
    async with client.stream("POST", "/v1/chat/completions", json=body) as reply:
        async for line in reply.aiter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                chunks += 1
    return chunks


async def _poll_health(client: httpx.AsyncClient, done: asyncio.Event, latencies: list[float]) -> None:
    """GET /health every 50 ms while the streams run; each answer's latency in ms."""
    while not done.is_set():
        start = time.perf_counter()
        reply = await client.get("/health")
        if reply.status_code == 200:
            latencies.append((time.perf_counter() - start) * 1000)
        await asyncio.sleep(0.05)


async def _server_round(url: str, concurrency: int, new_tokens: int) -> tuple[int, float, list[float]]:
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=600) as client, httpx.AsyncClient(
        base_url=url, timeout=600
    ) as health_client:
        done = asyncio.Event()
        poller = asyncio.create_task(_poll_health(health_client, done, latencies))
        start = time.perf_counter()
        counts = await asyncio.gather(*(_stream_one(client, q, new_tokens) for q in _questions(concurrency)))
        elapsed = time.perf_counter() - start
        done.set()
        await poller
        return sum(counts), elapsed, latencies


def _offline_round(engine: Engine, concurrency: int, new_tokens: int) -> tuple[int, float]:
    prompts: list[str] = []
    for q in _questions(concurrency):
        prompts.append(engine.tokenizer.render_chat([{"role": "user", "content": q}], add_generation_prompt=True))
    engine.flush_cache()
    start = time.perf_counter()
    results = engine.generate(prompts, {"temperature": 0, "max_new_tokens": new_tokens, "ignore_eos": True})
    assert isinstance(results, list)
    return sum(r["meta_info"]["completion_tokens"] for r in results), time.perf_counter() - start


def run(concurrency: list[int], new_tokens: int = 64, repeats: int = 2) -> dict[str, Any]:
    model_dir = pull_model(REPO).model.path
    engine = Engine(str(model_dir), max_total_tokens=16384)
    rows = []
    with tempfile.TemporaryDirectory() as logs:
        args = ("--served-model-name", "smollm2", "--max-total-tokens", "16384")
        with engine_server(model_dir, Path(logs), *args) as server:
            for c in concurrency:
                server_rates, offline_rates, health_ms = [], [], []
                for _ in range(repeats):  # interleaved, so drift hits both sides
                    tokens, seconds = _offline_round(engine, c, new_tokens)
                    offline_rates.append(tokens / seconds)
                    chunks, seconds, latencies = asyncio.run(_server_round(server.url, c, new_tokens))
                    server_rates.append(chunks / seconds)
                    health_ms += latencies
                ours, offline = statistics.median(server_rates), statistics.median(offline_rates)
                health_ms.sort()
                rows.append({"concurrency": c, "server_chunks_per_s": ours, "offline_tokens_per_s": offline,
                             "ratio": ours / offline,
                             "health_p50_ms": health_ms[len(health_ms) // 2] if health_ms else float("nan"),
                             "health_p99_ms": health_ms[int(len(health_ms) * 0.99)] if health_ms else float("nan")})
    joined = ",".join(str(c) for c in concurrency)
    return {"rows": rows, "command": f"python -m bench.engine_streaming --concurrency {joined} --new-tokens {new_tokens}"}


def markdown_table(result: dict[str, Any]) -> str:
    lines = [
        "| concurrent streams | server SSE chunks/s | offline engine tokens/s | ratio | /health p50 ms | /health p99 ms |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['concurrency']} | {r['server_chunks_per_s']:.1f} | {r['offline_tokens_per_s']:.1f} "
            f"| {r['ratio']:.2f} | {r['health_p50_ms']:.1f} | {r['health_p99_ms']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--new-tokens", type=int, default=64)
    args = parser.parse_args()
    result = run([int(c) for c in args.concurrency.split(",")], args.new_tokens)
    print(markdown_table(result))


if __name__ == "__main__":
    main()
