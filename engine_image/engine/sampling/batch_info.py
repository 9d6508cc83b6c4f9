"""One decode step's sampling parameters as batched tensors, built once per batch composition."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from engine.sampling.logit_bias import BatchLogitBias
from engine.sampling.params import SamplingParams
from engine.sampling.penalties import BatchPenalties
from engine.sampling.seeding import make_generators


@dataclass(frozen=True)
class SamplingBatchInfo:
    """Per-row sampling settings for a batch of B requests over a vocab of width V.

    Greedy rows (`SamplingParams.is_greedy`) are decoded by argmax, i.e. top_k=1
    semantics; their entries in the sampling tensors are neutral (temperature 1, no
    filtering) and the `need_*` flags only reflect the sampled rows.
    """

    temperatures: torch.Tensor  # [B, 1] fp32
    top_ps: torch.Tensor  # [B] fp32; 1.0 = off
    top_ks: torch.Tensor  # [B] int64; V = off
    min_ps: torch.Tensor  # [B] fp32; 0.0 = off
    greedy_mask: torch.Tensor  # [B] bool
    all_greedy: bool
    need_top_p: bool
    need_top_k: bool
    need_min_p: bool
    generators: tuple[torch.Generator | None, ...]
    penalties: BatchPenalties | None
    vocab_size: int
    logit_bias: BatchLogitBias | None = None

    @property
    def batch_size(self) -> int:
        return len(self.generators)

    @property
    def has_penalties(self) -> bool:
        return self.penalties is not None

    @classmethod
    def from_params(
        cls,
        params: Sequence[SamplingParams],
        device: torch.device | str,
        vocab_size: int,
        output_lens: Sequence[int],
    ) -> SamplingBatchInfo:
        """Batch the validated params of this step's requests, in batch-row order.

        `vocab_size` is the logits' width. `output_lens[i]` is how many tokens request i
        has generated so far; seeded requests mix it into their seed so every step draws
        fresh yet reproducible noise (see `engine.sampling.seeding`).
        """
        sampled = [not p.is_greedy for p in params]
        temperatures = [p.temperature if s else 1.0 for p, s in zip(params, sampled)]
        top_ps = [p.top_p if s else 1.0 for p, s in zip(params, sampled)]
        top_ks = [
            _effective_top_k(p.top_k, vocab_size) if s else vocab_size
            for p, s in zip(params, sampled)
        ]
        min_ps = [p.min_p if s else 0.0 for p, s in zip(params, sampled)]

        def fp32(values: list[float]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float32, device=device)

        return cls(
            temperatures=fp32(temperatures).unsqueeze(1),
            top_ps=fp32(top_ps),
            top_ks=torch.tensor(top_ks, dtype=torch.long, device=device),
            min_ps=fp32(min_ps),
            greedy_mask=torch.tensor([not s for s in sampled], dtype=torch.bool, device=device),
            all_greedy=not any(sampled),
            need_top_p=any(p < 1.0 for p in top_ps),
            need_top_k=any(k < vocab_size for k in top_ks),
            need_min_p=any(p > 0.0 for p in min_ps),
            generators=make_generators(params, output_lens, device),
            penalties=BatchPenalties.from_params(params, device),
            vocab_size=vocab_size,
            logit_bias=BatchLogitBias.from_params(params, device),
        )


class SamplingBatchInfoCache:
    """The ``SamplingBatchInfo`` of the last batch composition (the same params objects in
    the same rows), reused while it lasts: a decode batch keeps its requests for many steps,
    and each of the info's tensors is a host-to-device copy, which on CUDA waits for the
    stream (the forward just queued). Only seeded rows' generators follow the step."""

    def __init__(self, device: torch.device | str) -> None:
        self.device = device
        self._params: list[SamplingParams] = []
        self._info: SamplingBatchInfo | None = None

    def get(self, params: list[SamplingParams], vocab_size: int, output_lens: Sequence[int]) -> SamplingBatchInfo:
        """As ``SamplingBatchInfo.from_params(params, device, vocab_size, output_lens)``."""
        info = self._info
        same = (
            info is not None
            and info.vocab_size == vocab_size
            and len(params) == len(self._params)
            and all(p is q for p, q in zip(params, self._params))
        )
        if info is None or not same:
            self._params = list(params)
            self._info = SamplingBatchInfo.from_params(params, self.device, vocab_size, output_lens)
            return self._info
        if any(g is not None for g in info.generators):
            return replace(info, generators=make_generators(params, output_lens, self.device))
        return info


def _effective_top_k(top_k: int, vocab_size: int) -> int:
    """-1 (off) and anything wider than the vocab both mean 'keep every token'."""
    return vocab_size if top_k == -1 else min(top_k, vocab_size)
