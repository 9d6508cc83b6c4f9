"""Top-k, top-p and min-p filtering of a batch of probability rows."""

from __future__ import annotations

import torch

from engine.sampling.batch_info import SamplingBatchInfo


def filter_probs(probs: torch.Tensor, info: SamplingBatchInfo) -> torch.Tensor:
    """Zero the probabilities of tokens that top-k / top-p / min-p exclude.

    `probs` is fp32 [B, V] (softmax after temperature). The result is NOT renormalised:
    the exponential race in `engine.sampling.draw` samples proportionally to whatever
    mass remains, so renormalising would only cost a pass.

    NOTE: the three filters are applied jointly to the same distribution, as SGLang does
    (FlashInfer's `filter_apply_order="joint"`), rather than sequentially as in HF:
    - top-k keeps the k most probable tokens;
    - top-p keeps the minimal nucleus, i.e. a token is kept iff the mass of the more
      probable tokens before it is still < top_p (so the top token always survives);
    - min-p keeps tokens with prob >= min_p * max prob.
    """
    keep: torch.Tensor | None = None
    if info.need_top_k or info.need_top_p:
        sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
        keep_sorted = torch.ones_like(sorted_probs, dtype=torch.bool)
        if info.need_top_k:
            positions = torch.arange(probs.shape[-1], device=probs.device).unsqueeze(0)
            keep_sorted &= positions < info.top_ks.unsqueeze(1)
        if info.need_top_p:
            # NOTE: an exclusive cumsum (mass strictly before each token) computed by
            # shifting, not `cumsum - p`, which loses precision on large vocabs.
            mass_before = sorted_probs.cumsum(dim=-1).roll(1, dims=-1)
            mass_before[:, 0] = 0.0
            top_ps = info.top_ps.unsqueeze(1)
            # NOTE: rows with top_p == 1 are exempt so fp rounding of the cumsum can never
            # drop tail tokens there.
            keep_sorted &= (mass_before < top_ps) | (top_ps >= 1.0)
        keep = torch.empty_like(keep_sorted).scatter_(1, order, keep_sorted)
    if info.need_min_p:
        threshold = probs.amax(dim=-1, keepdim=True) * info.min_ps.unsqueeze(1)
        above = probs >= threshold
        keep = above if keep is None else keep & above
    return probs if keep is None else probs * keep
