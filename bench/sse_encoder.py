"""SSE chunk encoding: our msgspec Structs vs the equivalent pydantic models, side by side.

    python -m bench.sse_encoder [--chunks 20000]

Both encode the same stream of chat.completion.chunk events to ``data: ...`` bytes; the
pydantic side builds one model object per token and dumps it, as an OpenAI server written
with pydantic response models would.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from pydantic import BaseModel

from engine.server.openai.protocol import ChatCompletionChunk, ChunkChoice, Delta, sse_event


class _PDelta(BaseModel):
    role: str | None = None
    content: str | None = None


class _PChoice(BaseModel):
    index: int
    delta: _PDelta
    finish_reason: str | None = None
    logprobs: dict[str, Any] | None = None


class _PChunk(BaseModel):
    object: str
    id: str
    created: int
    model: str
    choices: list[_PChoice]


def _msgspec_stream(pieces: list[str]) -> int:
    total = 0
    for piece in pieces:
        chunk = ChatCompletionChunk(
            object="chat.completion.chunk", id="chatcmpl-bench", created=1, model="smollm2",
            choices=[ChunkChoice(index=0, delta=Delta(content=piece))],
        )
        total += len(sse_event(chunk))
    return total


def _pydantic_stream(pieces: list[str]) -> int:
    total = 0
    for piece in pieces:
        chunk = _PChunk(
            object="chat.completion.chunk", id="chatcmpl-bench", created=1, model="smollm2",
            choices=[_PChoice(index=0, delta=_PDelta(content=piece))],
        )
        total += len(b"data: " + chunk.model_dump_json(exclude_none=True).encode() + b"\n\n")
    return total


def _best_of(fn: Any, pieces: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(pieces)
        times.append(time.perf_counter() - start)
    return min(times)


def run(chunks: int = 20000, repeats: int = 5) -> dict[str, Any]:
    pieces = [f" word{i % 97}" for i in range(chunks)]
    assert _msgspec_stream(pieces[:10]) == _pydantic_stream(pieces[:10])  # same bytes, same work
    rounds = []
    for _ in range(repeats):  # interleaved, so drift hits both sides
        ours = _best_of(_msgspec_stream, pieces, 1)
        peer = _best_of(_pydantic_stream, pieces, 1)
        rounds.append((ours, peer))
    ours = statistics.median(r[0] for r in rounds)
    peer = statistics.median(r[1] for r in rounds)
    return {
        "chunks": chunks,
        "msgspec_chunks_per_s": chunks / ours,
        "pydantic_chunks_per_s": chunks / peer,
        "speedup": peer / ours,
        "command": f"python -m bench.sse_encoder --chunks {chunks}",
    }


def markdown_table(result: dict[str, Any]) -> str:
    return "\n".join([
        "| encoder | chunks/s | ratio |",
        "|---|---|---|",
        f"| msgspec Structs (ours) | {result['msgspec_chunks_per_s']:,.0f} | {result['speedup']:.1f}x |",
        f"| pydantic models | {result['pydantic_chunks_per_s']:,.0f} | 1.0x |",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20000)
    args = parser.parse_args()
    print(markdown_table(run(args.chunks)))


if __name__ == "__main__":
    main()
