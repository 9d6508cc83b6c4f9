"""Sampler: greedy decoding equals argmax, and raw log-probs / top log-probs."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sampling.batch_info import SamplingBatchInfo
from engine.sampling.params import SamplingParams
from engine.sampling.sampler import Sampler


def _info(params: list[SamplingParams], vocab: int) -> SamplingBatchInfo:
    return SamplingBatchInfo.from_params(params, "cpu", vocab, [0] * len(params))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_greedy_equals_argmax_with_lowest_index_on_ties(dtype: torch.dtype) -> None:
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [5.0, 5.0, 5.0, 5.0], [-1.0, -2.0, -0.5, -0.5]])
    info = _info([SamplingParams(temperature=0.0)] * 3, 4)
    assert info.all_greedy
    out = Sampler().sample(logits.to(dtype), info)
    assert out.next_token_ids.tolist() == [1, 0, 2]
    assert out.next_token_ids.dtype == torch.int64
    assert out.logprobs is None and out.top_logprobs is None


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), batch=st.integers(1, 6), vocab=st.integers(1, 50))
def test_greedy_matches_torch_argmax_on_random_logits(seed: int, batch: int, vocab: int) -> None:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g).round(decimals=1)  # rounding forces ties
    out = Sampler().sample(logits, _info([SamplingParams(top_k=1)] * batch, vocab))
    assert torch.equal(out.next_token_ids, logits.argmax(dim=-1))


def test_top_k_one_and_tiny_temperature_are_greedy_in_a_mixed_batch() -> None:
    torch.manual_seed(0)
    logits = torch.randn(4, 100)
    params = [
        SamplingParams(top_k=1, temperature=2.0, seed=7),
        SamplingParams(temperature=5.0),
        SamplingParams(temperature=1e-7),
        SamplingParams(temperature=3.0, top_p=0.9),
    ]
    info = _info(params, 100)
    assert not info.all_greedy
    argmax = logits.argmax(dim=-1)
    for _ in range(5):
        out = Sampler().sample(logits, info)
        assert out.next_token_ids[0] == argmax[0] and out.next_token_ids[2] == argmax[2]


def test_logprobs_are_raw_log_softmax_before_temperature() -> None:
    torch.manual_seed(1)
    logits = torch.randn(3, 20, dtype=torch.bfloat16)
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.3, top_k=5),
        SamplingParams(temperature=1.7, min_p=0.1),
    ]
    out = Sampler().sample(logits, _info(params, 20), return_logprob=True)
    expected = torch.log_softmax(logits.float(), dim=-1)
    assert out.logprobs is not None and out.logprobs.dtype == torch.float32
    rows = torch.arange(3)
    assert torch.allclose(out.logprobs, expected[rows, out.next_token_ids], atol=1e-6)


def test_top_logprobs_sorted_with_requested_k() -> None:
    torch.manual_seed(2)
    logits = torch.randn(3, 30)
    out = Sampler().sample(
        logits, _info([SamplingParams()] * 3, 30), return_logprob=True, top_logprobs_nums=[3, 0, 40]
    )
    assert out.top_logprobs is not None
    (ids0, lp0), (ids1, lp1), (ids2, lp2) = out.top_logprobs
    assert (ids1, lp1) == ([], [])
    assert len(ids0) == 3 and len(ids2) == 30  # k is capped at the vocab
    expected = torch.log_softmax(logits, dim=-1)
    for row, (ids, lps) in [(0, (ids0, lp0)), (2, (ids2, lp2))]:
        assert lps == sorted(lps, reverse=True)
        assert ids[0] == int(logits[row].argmax())
        assert torch.allclose(torch.tensor(lps), expected[row, ids], atol=1e-6)


def test_top_logprobs_none_when_not_requested() -> None:
    out = Sampler().sample(
        torch.zeros(2, 5),
        _info([SamplingParams()] * 2, 5),
        return_logprob=True,
        top_logprobs_nums=[0, 0],
    )
    assert out.top_logprobs is None and out.logprobs is not None


def test_rejects_inconsistent_calls() -> None:
    info = _info([SamplingParams()] * 2, 5)
    with pytest.raises(ValueError, match="return_logprob"):
        Sampler().sample(torch.zeros(2, 5), info, top_logprobs_nums=[1, 0])
    with pytest.raises(ValueError, match="does not match"):
        Sampler().sample(torch.zeros(2, 6), info)
    with pytest.raises(ValueError, match="top_logprobs_nums"):
        Sampler().sample(torch.zeros(2, 5), info, return_logprob=True, top_logprobs_nums=[1])
