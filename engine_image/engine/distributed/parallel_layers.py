"""The layers that meet the other ranks: row-parallel linear (o_proj, down_proj), the
vocab-parallel embedding and LM head. The column-parallel ones (qkv_proj, gate_up_proj) are
plain ``nn.Linear`` on this rank's rows and need no communication."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.distributed.parallel_state import TensorParallel, all_reduce, gather_on_driver
from engine.distributed.shard_plan import ShardPlan
from engine.models.llama import MLP, Attention, LlamaFamilyForCausalLM


class RowParallelLinear(nn.Module):
    """``x @ W.T + b`` where this rank holds W's columns for its part of ``x``: partial sums,
    one all-reduce, then the bias (whole on every rank, added once)."""

    def __init__(self, in_local: int, out_features: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_local))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = all_reduce(F.linear(x, self.weight))
        return out if self.bias is None else out.add_(self.bias)


class VocabParallelEmbedding(nn.Embedding):
    """This rank's rows of the table; a token outside them contributes zeros to the all-reduce."""

    def __init__(self, plan: ShardPlan, hidden_size: int) -> None:
        super().__init__(plan.vocab_rows, hidden_size, _weight=torch.empty(plan.vocab_rows, hidden_size))
        self.vocab_start = plan.vocab_start

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        local = input_ids - self.vocab_start
        outside = (local < 0) | (local >= self.num_embeddings)
        rows = F.embedding(local.masked_fill(outside, 0), self.weight)
        return all_reduce(rows.masked_fill_(outside.unsqueeze(-1), 0.0))


class ParallelLMHead(nn.Module):
    """This rank's vocab rows of the head (its own, or the tied embedding's); the logits of
    every rank are gathered on rank 0 and trimmed to the vocabulary. Other ranks get their
    part back and discard it."""

    def __init__(self, plan: ShardPlan, state: TensorParallel, hidden_size: int, tied: nn.Embedding | None) -> None:
        super().__init__()
        self.state = state
        self.vocab_size = plan.vocab_size
        # NOTE: the tied embedding is held as a module, not its weight: allocate_on and the
        # loader replace parameters, and the head must read whatever the embedding holds.
        self.tied = [tied] if tied is not None else []  # a list: not registered as a submodule
        self.weight = None if tied is not None else nn.Parameter(torch.empty(plan.vocab_rows, hidden_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        weight = self.tied[0].weight if self.tied else self.weight
        assert weight is not None, "a head holds rows or is tied"
        logits = gather_on_driver(F.linear(hidden, weight), self.state)
        return logits[..., : self.vocab_size] if self.state.is_driver else logits


def parallelize(model: nn.Module, plan: ShardPlan, state: TensorParallel) -> None:
    """Swaps a Llama-family model's (built on ``plan.local_config``) communicating layers for
    their parallel forms; called on the meta device, before the weights load."""
    assert isinstance(model, LlamaFamilyForCausalLM), "tensor parallelism covers the Llama family"
    config = model.config
    for module in model.modules():
        if isinstance(module, Attention):
            module.o_proj = RowParallelLinear(module.q_size, config.hidden_size, config.o_proj_bias)
        elif isinstance(module, MLP):
            module.down_proj = RowParallelLinear(module.intermediate_size, config.hidden_size, config.mlp_bias)
    embedding = VocabParallelEmbedding(plan, config.hidden_size)
    model.embed_tokens = embedding
    model.lm_head = ParallelLMHead(plan, state, config.hidden_size, embedding if config.tie_word_embeddings else None)
