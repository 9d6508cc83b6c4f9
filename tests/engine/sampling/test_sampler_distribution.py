"""Sampler: empirical distributions of temperature, top-k, top-p and min-p sampling."""

from __future__ import annotations

import torch

from engine.sampling.batch_info import SamplingBatchInfo
from engine.sampling.params import SamplingParams
from engine.sampling.sampler import Sampler

DRAWS = 20_000


def _draw(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """DRAWS samples from one logits row, as one batch of identical rows; returns counts."""
    torch.manual_seed(1234)
    vocab = logits.shape[-1]
    info = SamplingBatchInfo.from_params([params] * DRAWS, "cpu", vocab, [0] * DRAWS)
    ids = Sampler().sample(logits.expand(DRAWS, vocab), info).next_token_ids
    return torch.bincount(ids, minlength=vocab).double()


def _chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs.double() * counts.sum()
    support = expected > 0
    assert counts[~support].sum() == 0, "drew a token outside the support"
    return float(((counts[support] - expected[support]) ** 2 / expected[support]).sum())


# NOTE: 99.9th percentiles of chi-square for 4 / 2 / 1 degrees of freedom; with a fixed
# seed the tests are deterministic, the bound only says the seed is not cherry-picked.
CHI2_4DOF, CHI2_2DOF, CHI2_1DOF = 18.47, 13.82, 10.83


def test_temperature_sampling_matches_softmax() -> None:
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    for temperature in (0.7, 1.0, 1.8):
        counts = _draw(logits, SamplingParams(temperature=temperature))
        assert _chi_square(counts, torch.softmax(logits / temperature, dim=-1)) < CHI2_4DOF


def test_top_k_keeps_k_most_likely_renormalised() -> None:
    logits = torch.tensor([0.0, 2.0, -1.0, 1.5, 1.0])
    counts = _draw(logits, SamplingParams(top_k=2))
    probs = torch.softmax(logits, dim=-1) * torch.tensor([0, 1, 0, 1, 0])
    assert _chi_square(counts, probs / probs.sum()) < CHI2_1DOF


def test_top_p_keeps_minimal_nucleus() -> None:
    probs = torch.tensor([0.10, 0.50, 0.15, 0.25])
    # Sorted: 0.50, 0.25 | 0.15, 0.10. Mass before 0.15 is 0.75 >= 0.7, so it is excluded.
    counts = _draw(probs.log(), SamplingParams(top_p=0.7))
    assert _chi_square(counts, torch.tensor([0.0, 2 / 3, 0.0, 1 / 3])) < CHI2_1DOF
    # With top_p=0.8 the nucleus needs the third token too.
    counts = _draw(probs.log(), SamplingParams(top_p=0.8))
    assert _chi_square(counts, torch.tensor([0.0, 0.5, 0.15, 0.25]) / 0.9) < CHI2_2DOF


def test_top_p_smaller_than_top_token_is_greedy() -> None:
    counts = _draw(torch.tensor([0.2, 0.45, 0.35]).log(), SamplingParams(top_p=0.05))
    assert counts.tolist() == [0, DRAWS, 0]


def test_min_p_drops_tokens_below_fraction_of_max() -> None:
    probs = torch.tensor([0.05, 0.5, 0.3, 0.15])
    # Threshold 0.2 * 0.5 = 0.1: only the 0.05 token is dropped.
    counts = _draw(probs.log(), SamplingParams(min_p=0.2))
    assert _chi_square(counts, torch.tensor([0.0, 0.5, 0.3, 0.15]) / 0.95) < CHI2_2DOF


def test_filters_combine_jointly_with_temperature() -> None:
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0])
    params = SamplingParams(temperature=0.5, top_k=3, min_p=0.05)
    counts = _draw(logits, params)
    probs = torch.softmax(logits / 0.5, dim=-1)
    keep = (torch.arange(5) < 3) & (probs >= 0.05 * probs.max())  # drops token 2 as well
    assert keep.tolist() == [True, True, False, False, False]
    assert _chi_square(counts, probs * keep / (probs * keep).sum()) < CHI2_1DOF
