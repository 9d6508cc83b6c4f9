"""SamplingBatchInfoCache: a batch composition's tensors are built once and reused while the
same requests decode; seeded rows still draw each step's own noise, so sampled tokens are
those of an info built afresh every step."""

from __future__ import annotations

import torch

from engine.sampling.batch_info import SamplingBatchInfo, SamplingBatchInfoCache
from engine.sampling.params import SamplingParams
from engine.sampling.sampler import Sampler

VOCAB = 500
STEPS = 6


def _logits(step: int, rows: int) -> torch.Tensor:
    return torch.randn(rows, VOCAB, generator=torch.Generator().manual_seed(step))


def test_a_composition_is_built_once_and_rebuilt_when_it_changes() -> None:
    cache = SamplingBatchInfoCache("cpu")
    batch = [SamplingParams(temperature=0.7, top_k=20), SamplingParams(temperature=0.0)]
    first = cache.get(batch, VOCAB, [0, 0])
    assert cache.get(list(batch), VOCAB, [1, 1]) is first, "same params objects: reused"
    # NOTE: equal params of another request are another composition all the same.
    other = [batch[0], SamplingParams(temperature=0.0)]
    rebuilt = cache.get(other, VOCAB, [2, 0])
    assert rebuilt is not first
    assert cache.get(other[:1], VOCAB, [3]).batch_size == 1
    assert cache.get(other[:1], 2 * VOCAB, [3]).vocab_size == 2 * VOCAB


def test_seeded_sampling_equals_an_info_built_every_step() -> None:
    batch = [
        SamplingParams(temperature=1.3, top_p=0.9, seed=7),
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.8, min_p=0.05, seed=8),
    ]
    cache = SamplingBatchInfoCache("cpu")
    sampler = Sampler()
    cached, fresh = [], []
    for step in range(STEPS):
        lens = [step, step, 2 * step]
        logits = _logits(step, len(batch))
        cached.append(sampler.sample(logits, cache.get(batch, VOCAB, lens)).next_token_ids.tolist())
        info = SamplingBatchInfo.from_params(batch, "cpu", VOCAB, lens)
        fresh.append(sampler.sample(logits, info).next_token_ids.tolist())
    assert cached == fresh
    assert len({tokens[0] for tokens in cached}) > 1, "every step draws fresh noise"
