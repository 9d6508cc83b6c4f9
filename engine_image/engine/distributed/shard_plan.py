"""What one rank holds of the model: its heads, its MLP columns, its vocab rows; and the
checkpoint tensors narrowed to that part as they stream in."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from engine.config.model_config import ModelConfig


@dataclass(frozen=True)
class ShardPlan:
    """Rank ``rank`` of ``size``: a contiguous block of each sharded dimension.

    KV heads are split when ``size`` divides them, else (fewer KV heads than ranks) each rank
    keeps a copy of the one KV head its query heads attend with. The vocabulary is padded to
    ``size * vocab_rows``; padding rows are zeros, their logits are dropped after the gather.
    """

    rank: int
    size: int
    head_dim: int
    num_heads: int  # query heads on this rank
    num_kv_heads: int  # KV heads on this rank
    kv_head_start: int
    intermediate_size: int  # MLP columns on this rank
    vocab_rows: int  # vocabulary rows on this rank, padding included
    vocab_size: int  # the whole model's

    @classmethod
    def for_rank(cls, config: ModelConfig, rank: int, size: int) -> ShardPlan:
        heads, kv_heads = config.num_heads, config.num_kv_heads
        # NOTE: checked at the command line (distributed/tp_checks.py); asserted here for the
        # offline API.
        assert heads % size == 0 and config.intermediate_size % size == 0, "tp-size divides heads and MLP"
        assert kv_heads % size == 0 or size % kv_heads == 0, "tp-size divides the KV heads or they divide it"
        local_heads = heads // size
        if kv_heads >= size:
            local_kv, kv_start = kv_heads // size, rank * (kv_heads // size)
        else:
            # NOTE: this rank's first query head's group; its other query heads share it,
            # since size % kv_heads == 0 keeps a rank's heads inside one group.
            local_kv, kv_start = 1, (rank * local_heads) // (heads // kv_heads)
        return cls(
            rank=rank, size=size, head_dim=config.head_dim, num_heads=local_heads,
            num_kv_heads=local_kv, kv_head_start=kv_start,
            intermediate_size=config.intermediate_size // size,
            vocab_rows=-(-config.vocab_size // size), vocab_size=config.vocab_size,
        )  # fmt: skip

    @property
    def vocab_start(self) -> int:
        return self.rank * self.vocab_rows

    def local_config(self, config: ModelConfig) -> ModelConfig:
        """The shapes this rank's model is built with (hidden size and layers stay whole)."""
        return dataclasses.replace(
            config,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            intermediate_size=self.intermediate_size,
            vocab_size=self.vocab_rows,
        )

    def shard_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
        """The checkpoint's (name, tensor) pairs, each narrowed to this rank's part."""
        for name, tensor in weights:
            yield name, self.shard(name, tensor)

    def shard(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        d = self.head_dim
        if ".q_proj." in name:
            return tensor.narrow(0, self.rank * self.num_heads * d, self.num_heads * d)
        if ".k_proj." in name or ".v_proj." in name:
            return tensor.narrow(0, self.kv_head_start * d, self.num_kv_heads * d)
        if name.endswith(".o_proj.weight"):
            return tensor.narrow(1, self.rank * self.num_heads * d, self.num_heads * d)
        if ".gate_proj." in name or ".up_proj." in name:
            return tensor.narrow(0, self.rank * self.intermediate_size, self.intermediate_size)
        if name.endswith(".down_proj.weight"):
            return tensor.narrow(1, self.rank * self.intermediate_size, self.intermediate_size)
        if name.endswith(("embed_tokens.weight", "lm_head.weight")):
            return self._vocab_rows(tensor)
        # NOTE: norms, and the row-parallel layers' biases (added once, after the all-reduce).
        return tensor

    def _vocab_rows(self, tensor: torch.Tensor) -> torch.Tensor:
        rows = tensor[self.vocab_start : self.vocab_start + self.vocab_rows]
        if rows.shape[0] == self.vocab_rows:
            return rows
        padded = tensor.new_zeros((self.vocab_rows, *tensor.shape[1:]))
        padded[: rows.shape[0]] = rows
        return padded
