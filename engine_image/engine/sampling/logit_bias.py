"""OpenAI's ``logit_bias``: per-request additive biases on chosen tokens' logits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.sampling.params import SamplingParams, logit_bias_ids


@dataclass(frozen=True)
class BatchLogitBias:
    """The biased (row, token) cells of one step's batch, as flat device tensors [k]."""

    rows: torch.Tensor  # int64
    tokens: torch.Tensor  # int64
    values: torch.Tensor  # fp32

    @classmethod
    def from_params(
        cls, params: Sequence[SamplingParams], device: torch.device | str
    ) -> BatchLogitBias | None:
        """The batch's biases, or None when no request sets one (the fast path)."""
        rows: list[int] = []
        tokens: list[int] = []
        values: list[float] = []
        for row, p in enumerate(params):
            for token, value in logit_bias_ids(p.logit_bias or {}).items():
                rows.append(row)
                tokens.append(token)
                values.append(value)
        if not rows:
            return None
        return cls(
            rows=torch.tensor(rows, dtype=torch.long, device=device),
            tokens=torch.tensor(tokens, dtype=torch.long, device=device),
            values=torch.tensor(values, dtype=torch.float32, device=device),
        )

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """fp32 logits [B, V] with the biases added; the input is not modified.

        NOTE: a token the grammar mask removed (-inf) stays removed whatever its bias.
        """
        return logits.float().index_put((self.rows, self.tokens), self.values, accumulate=True)
