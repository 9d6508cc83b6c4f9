"""What the scheduler reports after each step, per request."""

from __future__ import annotations

from dataclasses import dataclass

from engine.ipc.finish_reason import FinishReason


@dataclass(frozen=True)
class StepOutput:
    """New tokens of one request from one step (empty while a chunked prompt prefills).

    ``error`` set: the request was refused after it was queued (its grammar did not compile).
    """

    rid: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    top_logprobs: tuple[tuple[tuple[float, int], ...], ...]
    finish_reason: FinishReason | None
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    error: str | None = None
