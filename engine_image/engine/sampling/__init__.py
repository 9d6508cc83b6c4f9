"""The engine's sampling layer: pure torch over a batch of logits.

Scheduler wiring, per request: `params = SamplingParams.from_dict(d); params.validate(V)`;
at admission `state = RequestPenaltyState.for_request(params, prompt_ids, V, device)`.
Per step: `info = SamplingBatchInfo.from_params(params_list, device, V, output_lens)`,
`out = Sampler().sample(logits, info, penalty_states=states, return_logprob=...,
top_logprobs_nums=...)`, then `cumulate_batch(states, out.next_token_ids)`.
"""

from engine.sampling.batch_info import SamplingBatchInfo
from engine.sampling.errors import InvalidSamplingParams
from engine.sampling.params import SamplingParams
from engine.sampling.penalties import (
    BatchPenalties,
    RequestPenaltyState,
    apply_penalties,
    cumulate_batch,
)
from engine.sampling.sampler import SampleOutput, Sampler

__all__ = [
    "BatchPenalties",
    "InvalidSamplingParams",
    "RequestPenaltyState",
    "SampleOutput",
    "Sampler",
    "SamplingBatchInfo",
    "SamplingParams",
    "apply_penalties",
    "cumulate_batch",
]
