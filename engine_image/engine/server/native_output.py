"""SGLang's native result shape, ``{"text", "output_ids", "meta_info"}``: one builder for
``/generate`` and the offline ``Engine``, so the two cannot drift apart again.

NOTE: imports no web framework: the offline ``Engine`` uses it without the HTTP stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import LogprobPair


def native_result(
    rid: str,
    text: str,
    output_ids: Sequence[int],
    usage: tuple[int, int, int],
    finish_reason: FinishReason | None,
    latency_s: float,
    logprobs: Sequence[float] | None = None,
    top_logprobs: Sequence[Sequence[LogprobPair]] = (),
) -> dict[str, Any]:
    """``usage`` is (prompt, completion, cached) tokens; ``logprobs`` None leaves them out.

    Log-probs are SGLang's ``[logprob, token_id, text]`` triples with the text None.
    """
    prompt_tokens, completion_tokens, cached_tokens = usage
    meta: dict[str, Any] = {
        "id": rid,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cached_tokens": cached_tokens,
        "finish_reason": None if finish_reason is None else finish_reason.to_dict(),
        "e2e_latency": latency_s,
    }
    if logprobs is not None:
        meta["output_token_logprobs"] = [[lp, tok, None] for lp, tok in zip(logprobs, output_ids)]
        if top_logprobs:
            meta["output_top_logprobs"] = [[[lp, tok, None] for lp, tok in step] for step in top_logprobs]
    return {"text": text, "output_ids": list(output_ids), "meta_info": meta}
