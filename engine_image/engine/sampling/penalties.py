"""Frequency, presence and repetition penalties for a continuously changing batch.

Token statistics live per request (`RequestPenaltyState`, created once at admission and
updated after every step) so batch membership can change each step at no cost; the
per-row penalty values live in the step's `BatchPenalties`, which covers only the rows
that use a penalty. Requests without penalties have no state and cost nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.sampling.params import SamplingParams


@dataclass
class RequestPenaltyState:
    """One request's token statistics over a vocab of width V (the logits' last dim).

    `output_counts` [V] fp32 counts generated tokens (frequency / presence penalties);
    `seen` [V] bool marks prompt and generated tokens (repetition penalty, HF semantics).
    """

    output_counts: torch.Tensor
    seen: torch.Tensor

    @classmethod
    def for_request(
        cls,
        params: SamplingParams,
        prompt_ids: Sequence[int] | torch.Tensor,
        vocab_size: int,
        device: torch.device | str,
    ) -> RequestPenaltyState | None:
        """State for a newly admitted request, or None when it uses no penalty."""
        if not params.has_penalties:
            return None
        seen = torch.zeros(vocab_size, dtype=torch.bool, device=device)
        seen[torch.as_tensor(prompt_ids, dtype=torch.long, device=device)] = True
        counts = torch.zeros(vocab_size, dtype=torch.float32, device=device)
        return cls(output_counts=counts, seen=seen)

    def cumulate(self, output_ids: Sequence[int] | torch.Tensor) -> None:
        """Record newly generated tokens (usually the one sampled this step)."""
        ids = torch.as_tensor(output_ids, dtype=torch.long, device=self.seen.device).reshape(-1)
        self.output_counts.index_add_(0, ids, torch.ones_like(ids, dtype=torch.float32))
        self.seen[ids] = True


def cumulate_batch(
    states: Sequence[RequestPenaltyState | None], next_token_ids: torch.Tensor
) -> None:
    """Record one sampled token per row for every row that tracks penalties.

    NOTE: slices of the device tensor are used as indices, so this never syncs to host.
    """
    for row, state in enumerate(states):
        if state is not None:
            state.cumulate(next_token_ids[row : row + 1])


@dataclass(frozen=True)
class BatchPenalties:
    """Penalty values for the rows of one step's batch that use any penalty.

    `rows` are those rows' batch indices (host), `row_index` the same on device [k];
    `frequency`, `presence`, `repetition` are fp32 [k, 1].
    """

    rows: tuple[int, ...]
    row_index: torch.Tensor
    frequency: torch.Tensor
    presence: torch.Tensor
    repetition: torch.Tensor

    @classmethod
    def from_params(
        cls, params: Sequence[SamplingParams], device: torch.device | str
    ) -> BatchPenalties | None:
        """Penalties for the batch, or None when no request uses one (the fast path)."""
        rows = tuple(i for i, p in enumerate(params) if p.has_penalties)
        if not rows:
            return None

        def column(name: str) -> torch.Tensor:
            values = [float(getattr(params[i], name)) for i in rows]
            return torch.tensor(values, dtype=torch.float32, device=device).unsqueeze(1)

        return cls(
            rows=rows,
            row_index=torch.tensor(rows, dtype=torch.long, device=device),
            frequency=column("frequency_penalty"),
            presence=column("presence_penalty"),
            repetition=column("repetition_penalty"),
        )


def apply_penalties(
    logits: torch.Tensor,
    penalties: BatchPenalties,
    states: Sequence[RequestPenaltyState | None],
) -> torch.Tensor:
    """Return fp32 logits [B, V] with penalties applied; the input is not modified.

    NOTE: order follows vLLM: repetition first (HF semantics on prompt + output tokens:
    a positive logit is divided by the penalty, any other multiplied), then OpenAI's
    additive `logit -= frequency * count + presence * (count > 0)` on output tokens only.
    Rows without penalties are never touched, so their logits stay bit-identical.
    """
    if len(states) != logits.shape[0]:
        raise ValueError(f"got {len(states)} penalty states for a batch of {logits.shape[0]}")
    tracked: list[RequestPenaltyState] = []
    for row in penalties.rows:
        state = states[row]
        if state is None:
            raise ValueError(f"batch row {row} uses penalties but has no RequestPenaltyState")
        tracked.append(state)
    counts = torch.stack([s.output_counts for s in tracked])
    seen = torch.stack([s.seen for s in tracked])
    rows = logits.index_select(0, penalties.row_index).float()
    rep = penalties.repetition
    rows = torch.where(seen, torch.where(rows > 0, rows / rep, rows * rep), rows)
    rows = rows - penalties.frequency * counts - penalties.presence * (counts > 0)
    return logits.float().index_copy(0, penalties.row_index, rows)
