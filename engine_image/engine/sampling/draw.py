"""Drawing one token per row, with per-request generators for seeded rows."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def exponential_race(
    probs: torch.Tensor, generators: Sequence[torch.Generator | None]
) -> torch.Tensor:
    """Sample one token id per row of non-negative, possibly unnormalised `probs` [B, V].

    NOTE: argmax_i(p_i / E_i) with E_i ~ Exp(1) i.i.d. picks token i with probability
    p_i / sum(p) (the exponential race, equivalent to the Gumbel-max trick), so filtered
    rows need no renormalisation and the draw is a single batched argmax. Rows with a
    generator take all V of their noise values from it, which makes a seeded row's token
    independent of the other rows in the batch; the other rows share the global RNG.
    """
    noise = torch.empty_like(probs).exponential_()
    for row, generator in enumerate(generators):
        if generator is not None:
            noise[row].exponential_(generator=generator)
    # NOTE: exponential_ may return exactly 0; the clamp keeps p / E finite (<= 1 / tiny)
    # and keeps zero-probability tokens at 0 instead of 0 / 0 = NaN.
    noise.clamp_min_(torch.finfo(torch.float32).tiny)
    return (probs / noise).argmax(dim=-1)
