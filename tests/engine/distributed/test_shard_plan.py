"""A rank's part of each weight (no process group needed): the parts of all ranks put back
together are the checkpoint's tensors, KV heads copied where there are fewer than ranks,
the vocabulary padded with zero rows to a multiple of the ranks."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig

from engine.config.model_config import ModelConfig
from engine.distributed.shard_plan import ShardPlan
from engine.distributed.tp_checks import tp_problems

HEAD_DIM = 4


def _config(heads: int, kv_heads: int, vocab: int) -> ModelConfig:
    hf = LlamaConfig(
        vocab_size=vocab, hidden_size=heads * HEAD_DIM, intermediate_size=12, num_hidden_layers=1,
        num_attention_heads=heads, num_key_value_heads=kv_heads, architectures=["LlamaForCausalLM"],
    )  # fmt: skip
    return ModelConfig.from_dict(hf.to_dict(), "tiny")


def _parts(config: ModelConfig, size: int, name: str, tensor: torch.Tensor) -> list[torch.Tensor]:
    return [ShardPlan.for_rank(config, rank, size).shard(name, tensor) for rank in range(size)]


@pytest.mark.parametrize(("heads", "kv_heads", "size"), [(6, 1, 3), (6, 2, 2), (4, 2, 2), (4, 1, 2), (4, 4, 2)])
def test_attention_parts(heads: int, kv_heads: int, size: int) -> None:
    config = _config(heads, kv_heads, 10)
    hidden = heads * HEAD_DIM
    q = torch.randn(heads * HEAD_DIM, hidden)
    k = torch.randn(kv_heads * HEAD_DIM, hidden)
    o = torch.randn(hidden, heads * HEAD_DIM)
    q_parts = _parts(config, size, "layers.0.self_attn.q_proj.weight", q)
    assert torch.equal(torch.cat(q_parts), q)
    assert torch.equal(torch.cat(_parts(config, size, "layers.0.self_attn.o_proj.weight", o), dim=1), o)
    k_parts = _parts(config, size, "layers.0.self_attn.k_proj.weight", k)
    group = heads // kv_heads
    for rank, part in enumerate(k_parts):
        plan = ShardPlan.for_rank(config, rank, size)
        # NOTE: each of this rank's query heads attends with the KV head of its group.
        first_q = rank * plan.num_heads
        assert plan.kv_head_start == first_q // group
        assert torch.equal(part, k[plan.kv_head_start * HEAD_DIM : (plan.kv_head_start + plan.num_kv_heads) * HEAD_DIM])
        last_q = first_q + plan.num_heads - 1
        assert last_q // group < plan.kv_head_start + plan.num_kv_heads


def test_vocab_rows_are_padded_with_zeros() -> None:
    config = _config(6, 1, 10)
    table = torch.randn(10, 24)
    parts = _parts(config, 3, "embed_tokens.weight", table)
    assert [p.shape[0] for p in parts] == [4, 4, 4]
    whole = torch.cat(parts)
    assert torch.equal(whole[:10], table) and not whole[10:].any()
    assert torch.equal(torch.cat(_parts(config, 3, "lm_head.weight", table))[:10], table)


def test_mlp_columns_and_norms() -> None:
    config = _config(6, 3, 10)
    gate, down, norm = torch.randn(12, 24), torch.randn(24, 12), torch.randn(24)
    assert torch.equal(torch.cat(_parts(config, 3, "layers.0.mlp.gate_proj.weight", gate)), gate)
    assert torch.equal(torch.cat(_parts(config, 3, "layers.0.mlp.down_proj.weight", down), dim=1), down)
    assert all(torch.equal(p, norm) for p in _parts(config, 3, "layers.0.input_layernorm.weight", norm))


def test_tp_problems_name_the_reason() -> None:
    assert tp_problems("/nonexistent", 2, False) == [
        "--tp-size 2 needs a safetensors model directory; GGUF models run at --tp-size 1"
    ]
    assert tp_problems("/nonexistent", 1, False) == []
