"""Seeded requests: reproducible across runs and independent of their batch companions."""

from __future__ import annotations

import torch

from engine.sampling.batch_info import SamplingBatchInfo
from engine.sampling.params import SamplingParams
from engine.sampling.sampler import Sampler
from engine.sampling.seeding import step_seed

VOCAB = 1000
STEPS = 12


def _logits(seed: int, rows: int = 1) -> torch.Tensor:
    return torch.randn(rows, VOCAB, generator=torch.Generator().manual_seed(seed))


def _decode(
    target: SamplingParams,
    target_logits: torch.Tensor,
    companions: list[SamplingParams],
    row: int,
) -> list[int]:
    """STEPS tokens of `target` sampled at batch position `row` among `companions`."""
    tokens = []
    for step in range(STEPS):
        params = companions[:row] + [target] + companions[row:]
        logits = _logits(1000 + step, len(params))
        logits[row] = target_logits
        info = SamplingBatchInfo.from_params(params, "cpu", VOCAB, [step] * len(params))
        tokens.append(int(Sampler().sample(logits, info).next_token_ids[row]))
    return tokens


def test_seeded_request_is_reproducible_across_runs_and_batches() -> None:
    target = SamplingParams(temperature=1.5, top_p=0.95, seed=42)
    logits = _logits(7)
    torch.manual_seed(0)
    alone = _decode(target, logits, [], 0)
    torch.manual_seed(1)  # a different global RNG state must not matter
    again = _decode(target, logits, [], 0)
    companions = [
        SamplingParams(),
        SamplingParams(temperature=0.0),
        SamplingParams(seed=43, top_k=50),
        SamplingParams(min_p=0.3, repetition_penalty=1.0),
    ]
    crowded = _decode(target, logits, companions, 2)
    last = _decode(target, logits, companions[:3], 3)
    assert alone == again == crowded == last
    assert len(set(alone)) > 1, "every step must draw fresh noise"


def test_different_seeds_diverge() -> None:
    logits = _logits(7)
    a = _decode(SamplingParams(temperature=2.0, seed=1), logits, [], 0)
    b = _decode(SamplingParams(temperature=2.0, seed=2), logits, [], 0)
    assert a != b


def test_unseeded_rows_follow_the_global_rng() -> None:
    params = [SamplingParams(temperature=2.0)] * 8
    info = SamplingBatchInfo.from_params(params, "cpu", VOCAB, [0] * 8)
    logits = _logits(3, 8)
    torch.manual_seed(5)
    first = Sampler().sample(logits, info).next_token_ids
    torch.manual_seed(5)
    assert torch.equal(Sampler().sample(logits, info).next_token_ids, first)
    assert info.generators == (None,) * 8


def test_greedy_rows_get_no_generator() -> None:
    params = [SamplingParams(temperature=0.0, seed=1), SamplingParams(seed=1)]
    info = SamplingBatchInfo.from_params(params, "cpu", VOCAB, [0, 0])
    assert info.generators[0] is None and info.generators[1] is not None


def test_step_seed_separates_consecutive_seeds_and_steps() -> None:
    # n > 1 requests use seeds seed, seed + 1, ...: (s, t + 1) must not alias (s + 1, t).
    seeds = {step_seed(s, t) for s in range(20) for t in range(20)}
    assert len(seeds) == 400
    assert all(0 <= s < 2**64 for s in seeds)
    assert step_seed(2**64 - 1, 5) < 2**64
