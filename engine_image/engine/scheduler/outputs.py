"""What the scheduler reports after each step: one delta per request it advanced, and the
requests it refused after they were queued."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.ipc.messages import LogprobPair, RequestDelta, RequestError
from engine.scheduler.request import Req


@dataclass
class StepOutputs:
    deltas: list[RequestDelta] = field(default_factory=list)
    refused: list[RequestError] = field(default_factory=list)  # e.g. a grammar that did not compile


def request_delta(
    req: Req,
    token_ids: list[int],
    logprobs: list[float],
    top_logprobs: list[list[LogprobPair]],
) -> RequestDelta:
    """``req``'s new tokens of this step, with its counts and finish reason as they are now."""
    return RequestDelta(
        rid=req.rid,
        token_ids=token_ids,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        finish_reason=req.finish_reason,
        prompt_tokens=len(req.input_ids),
        completion_tokens=len(req.output_ids),
        cached_tokens=req.cached_tokens,
    )
