"""MoE settings read from config.json under each architecture's names; clear loader errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file, save_file

from engine.config.model_config import ModelConfig
from engine.engine import Engine
from tests.engine.models.conftest import build_checkpoint
from tests.engine.moe.conftest import MOE_CASES

BASE: dict[str, Any] = {
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 16,
}


def _config(arch: str, **raw: Any) -> ModelConfig:
    return ModelConfig.from_dict({"architectures": [arch], **BASE, **raw}, "unused")


def test_qwen_moe_reads_sparse_step_and_dense_layers() -> None:
    mc = _config(
        "Qwen2MoeForCausalLM",
        num_experts=6,
        shared_expert_intermediate_size=24,
        decoder_sparse_step=2,
        mlp_only_layers=[3],
    )
    assert mc.moe is not None
    assert [i for i in range(4) if mc.moe.is_moe_layer(i)] == [1]
    moe = mc.moe
    assert (moe.num_experts, moe.shared_expert_intermediate_size, moe.norm_topk_prob) == (
        6,
        24,
        False,
    )
    assert mc.attention_bias and not mc.o_proj_bias, "Qwen2-MoE's q/k/v bias defaults on"


@pytest.mark.parametrize("key", ["num_experts", "num_local_experts"])
def test_qwen3_moe_reads_either_expert_count_name(key: str) -> None:
    """The Hub's configs say num_experts; transformers 5 writes num_local_experts."""
    mc = _config("Qwen3MoeForCausalLM", norm_topk_prob=True, **{key: 8})
    assert mc.moe is not None and mc.moe.num_experts == 8 and mc.moe.norm_topk_prob
    assert mc.moe.shared_expert_intermediate_size == 0 and mc.qk_norm


def test_mixtral_experts_are_intermediate_size_wide_and_renormalised() -> None:
    mc = _config("MixtralForCausalLM", num_local_experts=4)
    assert mc.moe is not None
    assert (mc.moe.expert_intermediate_size, mc.moe.norm_topk_prob) == (48, True)
    assert all(mc.moe.is_moe_layer(i) for i in range(4))


def test_dense_architectures_have_no_moe() -> None:
    assert _config("Qwen2ForCausalLM").moe is None


def test_a_missing_expert_tensor_is_named(tmp_path: Path, tokenizer_dir: Path) -> None:
    build_checkpoint(tmp_path, MOE_CASES["mixtral"], tokenizer_dir)
    file = tmp_path / "model.safetensors"
    tensors = load_file(file)
    missing = "model.layers.1.block_sparse_moe.experts.2.w3.weight"
    del tensors[missing]
    save_file(tensors, str(file))
    with pytest.raises(
        ValueError, match=r"missing 1 tensors, e\.g\. model\.layers\.1\.mlp\.experts\.2\.up_proj"
    ):
        Engine(str(tmp_path), max_total_tokens=256, device="cpu", dtype="float32")
