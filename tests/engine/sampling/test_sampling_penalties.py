"""Penalties: HF repetition semantics, OpenAI frequency / presence, continuous batching."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

from engine.sampling.batch_info import SamplingBatchInfo
from engine.sampling.params import SamplingParams
from engine.sampling.penalties import (
    BatchPenalties,
    RequestPenaltyState,
    apply_penalties,
    cumulate_batch,
)
from engine.sampling.sampler import Sampler

VOCAB = 32


def _state(params: SamplingParams, prompt: list[int], output: list[int]) -> RequestPenaltyState:
    state = RequestPenaltyState.for_request(params, prompt, VOCAB, "cpu")
    assert state is not None
    for token in output:
        state.cumulate([token])
    return state


def _penalise(
    logits: torch.Tensor,
    params: list[SamplingParams],
    states: list[RequestPenaltyState | None],
) -> torch.Tensor:
    penalties = BatchPenalties.from_params(params, "cpu")
    assert penalties is not None
    return apply_penalties(logits, penalties, states)


@settings(max_examples=25, deadline=None)
@given(
    penalty=st.floats(0.1, 3.0),
    prompt=st.lists(st.integers(0, VOCAB - 1), max_size=10),
    output=st.lists(st.integers(0, VOCAB - 1), max_size=10),
    seed=st.integers(0, 2**31 - 1),
)
def test_repetition_penalty_matches_transformers(
    penalty: float, prompt: list[int], output: list[int], seed: int
) -> None:
    # NOTE: 1.0 is no penalty at all, so no state (test_no_penalties_means_no_state_...).
    assume(penalty != 1.0)
    params = SamplingParams(repetition_penalty=penalty)
    logits = torch.randn(1, VOCAB, generator=torch.Generator().manual_seed(seed)) * 3
    ours = _penalise(logits, [params], [_state(params, prompt, output)])
    input_ids = torch.tensor([prompt + output], dtype=torch.long).reshape(1, -1)
    theirs = RepetitionPenaltyLogitsProcessor(penalty=penalty)(input_ids, logits.clone())
    assert torch.allclose(ours, theirs, rtol=1e-6, atol=0)


def test_frequency_and_presence_follow_openai_formula_on_output_only() -> None:
    params = SamplingParams(frequency_penalty=0.5, presence_penalty=-1.25)
    prompt, output = [1, 2, 3], [3, 3, 7, 9, 3]
    logits = torch.randn(1, VOCAB)
    ours = _penalise(logits, [params], [_state(params, prompt, output)])
    counts = torch.bincount(torch.tensor(output), minlength=VOCAB).float()
    expected = logits - 0.5 * counts - (-1.25) * (counts > 0).float()
    assert torch.allclose(ours, expected, atol=1e-6)
    assert ours[0, 1] == logits[0, 1]  # prompt-only tokens are not penalised additively


def test_all_three_penalties_compose_repetition_first() -> None:
    params = SamplingParams(repetition_penalty=2.0, frequency_penalty=1.0, presence_penalty=0.5)
    logits = torch.tensor([[4.0, -4.0, 4.0, 1.0]]).expand(1, 4).contiguous()
    logits = torch.nn.functional.pad(logits, (0, VOCAB - 4))
    ours = _penalise(logits, [params], [_state(params, [0], [1, 1, 2])])
    assert ours[0, :4].tolist() == [2.0, -8.0 - 2.0 - 0.5, 2.0 - 1.0 - 0.5, 1.0]


def test_no_penalties_means_no_state_and_no_batch_penalties() -> None:
    params = SamplingParams(temperature=0.5)
    assert RequestPenaltyState.for_request(params, [1, 2], VOCAB, "cpu") is None
    assert BatchPenalties.from_params([params, SamplingParams()], "cpu") is None
    info = SamplingBatchInfo.from_params([params], "cpu", VOCAB, [0])
    assert not info.has_penalties


def test_batch_membership_can_change_between_steps() -> None:
    """Per-request states follow their request to whatever row it occupies."""
    plain = SamplingParams(temperature=0.0)
    a = SamplingParams(temperature=0.0, repetition_penalty=100.0)
    b = SamplingParams(temperature=0.0, frequency_penalty=2.0)
    state_a = RequestPenaltyState.for_request(a, [5], VOCAB, "cpu")
    state_b = RequestPenaltyState.for_request(b, [], VOCAB, "cpu")
    logits = torch.full((3, VOCAB), 0.5)
    logits[:, 5] = 1.0  # token 5 wins unless penalised; the 0.5 ties break to the lowest id
    sampler = Sampler()

    step1 = [a, plain, b]
    states1: list[RequestPenaltyState | None] = [state_a, None, state_b]
    info = SamplingBatchInfo.from_params(step1, "cpu", VOCAB, [0, 0, 0])
    out = sampler.sample(logits, info, penalty_states=states1)
    assert out.next_token_ids.tolist() == [0, 5, 5]  # a saw 5 in its prompt
    cumulate_batch(states1, out.next_token_ids)

    step2 = [b, a]  # plain finished; b and a swapped rows
    states2: list[RequestPenaltyState | None] = [state_b, state_a]
    info = SamplingBatchInfo.from_params(step2, "cpu", VOCAB, [1, 1])
    out = sampler.sample(logits[:2], info, penalty_states=states2)
    # b generated 5 once (1 - 2 = -1), so token 0 wins; a now also penalises its token 0.
    assert out.next_token_ids.tolist() == [0, 1]
    assert state_b.output_counts[5] == 1 and state_a.output_counts[0] == 1


def test_penalties_do_not_modify_caller_logits_or_other_rows() -> None:
    params = [SamplingParams(), SamplingParams(repetition_penalty=1.5)]
    states = [None, _state(params[1], [0, 1, 2], [])]
    logits = torch.randn(2, VOCAB)
    original = logits.clone()
    out = _penalise(logits, params, states)
    assert torch.equal(logits, original)
    assert torch.equal(out[0], original[0])
    assert not torch.equal(out[1], original[1])


def test_missing_state_for_a_penalised_row_is_an_error() -> None:
    params = [SamplingParams(presence_penalty=1.0)]
    info = SamplingBatchInfo.from_params(params, "cpu", VOCAB, [0])
    with pytest.raises(ValueError, match="no penalty_states"):
        Sampler().sample(torch.zeros(1, VOCAB), info)
    with pytest.raises(ValueError, match="row 0 uses penalties"):
        Sampler().sample(torch.zeros(1, VOCAB), info, penalty_states=[None])


def test_logprobs_reflect_penalties() -> None:
    params = [SamplingParams(temperature=0.0, repetition_penalty=2.0)]
    states = [_state(params[0], [3], [])]
    logits = torch.randn(1, VOCAB)
    info = SamplingBatchInfo.from_params(params, "cpu", VOCAB, [0])
    out = Sampler().sample(
        logits, info, penalty_states=states, return_logprob=True, top_logprobs_nums=[VOCAB]
    )
    penalised = _penalise(logits, params, states)
    assert out.top_logprobs is not None
    ids, lps = out.top_logprobs[0]
    assert torch.allclose(torch.tensor(lps), torch.log_softmax(penalised, -1)[0, ids], atol=1e-6)
