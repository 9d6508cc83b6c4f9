"""A generation request checked against the model and the KV pool, as the scheduler tracks it."""

from __future__ import annotations

from engine.core.errors import InvalidRequest
from engine.runtime.model_runner import ModelRunner
from engine.sampling.params import SamplingParams
from engine.sampling.penalties import RequestPenaltyState
from engine.scheduler.request import Req


def new_request(
    runner: ModelRunner,
    eos_ids: frozenset[int],
    has_grammar_backend: bool,
    rid: str,
    input_ids: list[int],
    params: SamplingParams,
    return_logprob: bool,
    top_logprobs_num: int,
) -> Req:
    """Raises InvalidRequest (a client error). ``params`` come validated (``SamplingParams.validate``)."""
    mc, context = runner.model_config, runner.context_length
    if not input_ids:
        raise InvalidRequest("the prompt is empty")
    if any(not 0 <= t < mc.vocab_size for t in input_ids):
        raise InvalidRequest(f"input_ids must be token ids in [0, {mc.vocab_size})")
    if len(input_ids) >= context:
        raise InvalidRequest(f"the prompt has {len(input_ids)} tokens; this model's context length is {context}")
    if len(input_ids) >= runner.max_total_tokens:
        raise InvalidRequest(
            f"the prompt has {len(input_ids)} tokens; the KV cache holds only {runner.max_total_tokens}"
        )
    if top_logprobs_num < 0:
        raise InvalidRequest("top_logprobs_num must be >= 0")
    if params.grammar is not None and not has_grammar_backend:
        raise InvalidRequest(f"{params.grammar[0]} needs a grammar backend; there is none")
    room = min(context, runner.max_total_tokens) - len(input_ids)
    return Req(
        rid=rid,
        input_ids=list(input_ids),
        params=params,
        max_new_tokens=min(params.max_new_tokens, room),
        eos_token_ids=frozenset() if params.ignore_eos else eos_ids,
        return_logprob=return_logprob or top_logprobs_num > 0,
        top_logprobs_num=top_logprobs_num,
        penalty_state=RequestPenaltyState.for_request(params, input_ids, mc.vocab_size, runner.device),
    )
