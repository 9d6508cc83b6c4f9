"""The scheduler's output and control messages survive msgpack with their types intact."""

from __future__ import annotations

import msgspec
import pytest

from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import (
    ControlPayload,
    ControlResponse,
    ExpertDistributionDump,
    RequestDelta,
    TokenOutputs,
    WeightsUpdated,
    decode,
    encode,
)
from engine.ipc.scheduler_stats import KVCacheStats, SchedulerStats

STATS = SchedulerStats(
    model_path="/models/smol",
    weight_version=2,
    max_total_tokens=16384,
    context_length=8192,
    device="cpu",
    dtype="float32",
    num_running_reqs=1,
    num_waiting_reqs=0,
    kv=KVCacheStats(
        pool_free_tokens=16000,
        pool_used_tokens=384,
        radix_cache_tokens=300,
        radix_cache_evictable_tokens=200,
    ),
)


def test_token_outputs_keep_logprob_pairs_and_finish_reason() -> None:
    delta = RequestDelta(
        rid="r",
        token_ids=[5],
        logprobs=[-0.25],
        top_logprobs=[[(-0.25, 5), (-1.5, 9)]],
        finish_reason=FinishReason("stop", matched=5),
        prompt_tokens=7,
        completion_tokens=3,
        cached_tokens=4,
    )
    decoded = decode(encode(TokenOutputs([delta])))
    assert decoded == TokenOutputs([delta])
    assert isinstance(decoded, TokenOutputs)
    assert decoded.deltas[0].top_logprobs[0][1] == (-1.5, 9)


@pytest.mark.parametrize(
    "payload",
    [
        None,
        STATS,
        msgspec.structs.replace(STATS, kv=None),
        WeightsUpdated(3, "/models/other"),
        ExpertDistributionDump("layer_id,expert_id,count\n0,1,7\n"),
    ],
)
def test_control_payloads_keep_their_type(payload: ControlPayload | None) -> None:
    reply = ControlResponse("c", True, "done", payload)
    decoded = decode(encode(reply))
    assert decoded == reply
    assert isinstance(decoded, ControlResponse) and type(decoded.payload) is type(payload)
