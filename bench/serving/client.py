"""One streamed request: sends it, timestamps every content chunk, and reads the usage."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.serving.workload import Request


@dataclass
class Result:
    """Timings in seconds from the moment the request was sent."""

    ok: bool
    error: str = ""
    ttft_s: float = 0.0
    e2e_s: float = 0.0
    chunk_times_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    text: str = ""
    tag: str = ""  # e.g. the turn of a conversation
    prompt_tokens: int = 0  # from the usage, where the server reports it
    cached_tokens: int = 0  # of those, found in the server's prefix cache

    @property
    def itl_s(self) -> list[float]:
        """Gaps between consecutive content chunks."""
        return [b - a for a, b in zip(self.chunk_times_s, self.chunk_times_s[1:])]

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first; None for a one-token answer."""
        if self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


def _content(event: dict[str, Any]) -> str:
    choices = event.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    if "text" in choice:
        return choice["text"] or ""
    return (choice.get("delta") or {}).get("content") or ""


async def send(
    client: httpx.AsyncClient, request: Request, model: str, extra: dict[str, Any], tag: str = ""
) -> Result:
    started = time.perf_counter()
    result = Result(ok=False, tag=tag)
    usage_tokens: int | None = None
    pieces: list[str] = []
    try:
        async with client.stream(
            "POST", request.endpoint, json=request.body(model, extra)
        ) as reply:
            if reply.status_code != 200:
                result.error = f"HTTP {reply.status_code}: {(await reply.aread())[:300]!r}"
                return result
            async for line in reply.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                now = time.perf_counter() - started
                event = json.loads(line[6:])
                if usage := event.get("usage"):
                    usage_tokens = usage.get("completion_tokens")
                    result.prompt_tokens = usage.get("prompt_tokens") or 0
                    details = usage.get("prompt_tokens_details") or {}
                    result.cached_tokens = details.get("cached_tokens") or 0
                if text := _content(event):
                    result.chunk_times_s.append(now)
                    pieces.append(text)
    except httpx.HTTPError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    result.e2e_s = time.perf_counter() - started
    if not result.chunk_times_s:
        result.error = "no content chunk in the stream"
        return result
    result.ttft_s = result.chunk_times_s[0]
    result.text = "".join(pieces)
    # NOTE: a server may merge tokens into one chunk (partial UTF-8); usage counts tokens.
    result.output_tokens = usage_tokens or len(result.chunk_times_s)
    result.ok = True
    return result
