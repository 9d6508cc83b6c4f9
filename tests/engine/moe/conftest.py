"""Tiny random-weight MoE checkpoints of every supported MoE architecture, written by transformers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import MixtralConfig, PretrainedConfig, Qwen2MoeConfig, Qwen3MoeConfig

# NOTE: vocab equals SmolLM2's so its tokenizer fits; the rest is as small as GQA allows.
TINY_SHAPE: dict[str, Any] = {
    "vocab_size": 49152,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "num_experts_per_tok": 2,
    # NOTE: wider than the 0.02 default so attention, routing and logits are far from flat.
    "initializer_range": 0.2,
}

# NOTE: each case exercises what its architecture adds: Qwen2-MoE a shared expert, q/k/v
# biases, unnormalised top-k weights and a dense layer (mlp_only_layers); Qwen3-MoE q/k
# norm, its own head_dim and renormalised weights; Mixtral w1/w2/w3 under block_sparse_moe.
MOE_CASES: dict[str, PretrainedConfig] = {
    "qwen2_moe": Qwen2MoeConfig(
        **TINY_SHAPE,
        num_experts=8,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=48,
        norm_topk_prob=False,
        mlp_only_layers=[1],
    ),
    "qwen3_moe": Qwen3MoeConfig(
        **TINY_SHAPE, num_experts=8, moe_intermediate_size=32, norm_topk_prob=True, head_dim=32
    ),
    "mixtral": MixtralConfig(**TINY_SHAPE, num_local_experts=4),
}


@pytest.fixture(scope="session")
def tokenizer_dir(smollm2_dir: Path) -> Path:
    return smollm2_dir


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """Tiny matmuls gain nothing from threads; on a busy machine OpenMP's spin-waiting
    makes each one far slower. Run this package single-threaded."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
