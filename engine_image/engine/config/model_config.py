"""What the engine needs to know about a model, read from its ``config.json``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.config.architectures import (
    ENCODER_ARCHITECTURES,
    REWARD_ARCHITECTURES,
    SUPPORTED_ARCHITECTURES,
)
from engine.config.attention_pattern import AttentionPattern, attention_pattern
from engine.config.fp8_quantization import Fp8Config
from engine.config.quantization import Int4Config, quantization_config
from engine.config.rope_config import SUPPORTED_ROPE_TYPES, RopeConfig, rope_config
from engine.core.errors import UnsupportedModelError

__all__ = ["SUPPORTED_ROPE_TYPES", "ModelConfig", "MoeConfig", "RopeConfig", "supported_architecture"]

# NOTE: the MLP activations (``hidden_act``, Gemma's ``hidden_activation``) the layers compute.
SUPPORTED_ACTIVATIONS = ("silu", "gelu_pytorch_tanh")


@dataclass(frozen=True)
class MoeConfig:
    """A mixture-of-experts MLP: ``top_k`` of ``num_experts`` routed experts per token."""

    num_experts: int
    top_k: int
    expert_intermediate_size: int
    norm_topk_prob: bool  # renormalise the top-k routing weights to sum to 1
    shared_expert_intermediate_size: int  # 0: no shared expert (Qwen2-MoE has one)
    decoder_sparse_step: int  # every n-th layer is MoE ...
    mlp_only_layers: tuple[int, ...]  # ... except these, which keep a dense MLP

    def is_moe_layer(self, layer_id: int) -> bool:
        return layer_id not in self.mlp_only_layers and (layer_id + 1) % self.decoder_sparse_step == 0


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer's shape, normalised across Llama, Qwen2/3, Mistral, Gemma 2/3,
    Phi-3 and the MoE kin."""

    model_path: str
    architecture: str
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope: RopeConfig
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool  # q/k/v projections
    o_proj_bias: bool
    mlp_bias: bool
    qk_norm: bool
    hidden_act: str
    config_dtype: torch.dtype
    attention: AttentionPattern
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None
    raw: dict[str, Any]
    moe: MoeConfig | None = None  # None: every layer has a dense MLP
    quantization: Int4Config | Fp8Config | None = None  # None: float weights
    # NOTE: Gemma 3's sliding layers rotate with their own base; None: as ``rope``.
    local_rope: RopeConfig | None = None

    @classmethod
    def from_dir(cls, model_path: str | Path) -> ModelConfig:
        path = Path(model_path)
        config_file = path / "config.json"
        if not config_file.is_file():
            raise UnsupportedModelError(f"{path} has no config.json: not a Hugging Face model directory")
        raw = json.loads(config_file.read_text())
        return cls.from_dict(raw, str(path), _generation_eos(path))

    @classmethod
    def from_dict(
        cls, raw: dict[str, Any], model_path: str, generation_eos: tuple[int, ...] = ()
    ) -> ModelConfig:
        architectures = raw.get("architectures") or []
        arch = supported_architecture(architectures)
        num_heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        head_dim = int(raw.get("head_dim") or hidden // num_heads)
        model_type = str(raw.get("model_type", ""))
        eos = _as_ids(raw.get("eos_token_id")) + generation_eos
        hidden_act = str(raw.get("hidden_activation") or raw.get("hidden_act") or "silu")
        if hidden_act not in SUPPORTED_ACTIVATIONS:
            raise UnsupportedModelError(
                f"hidden_act {hidden_act!r} is not supported (supported: {', '.join(SUPPORTED_ACTIVATIONS)})"
            )
        num_layers = int(raw["num_hidden_layers"])
        return cls(
            model_path=model_path,
            architecture=arch,
            model_type=model_type,
            vocab_size=int(raw["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(raw["intermediate_size"]),
            num_layers=num_layers,
            num_heads=num_heads,
            num_kv_heads=int(raw.get("num_key_value_heads") or num_heads),
            head_dim=head_dim,
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope=rope_config(raw),
            max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            # NOTE: Qwen2 always has q/k/v biases and says so only through its architecture.
            attention_bias=bool(raw.get("attention_bias", False))
            or arch == "Qwen2ForCausalLM"
            or (arch == "Qwen2MoeForCausalLM" and bool(raw.get("qkv_bias", True))),
            # NOTE: Llama/Qwen3 ``attention_bias`` covers o_proj too; Qwen2's o_proj has none.
            o_proj_bias=bool(raw.get("attention_bias", False)),
            mlp_bias=bool(raw.get("mlp_bias", False)),
            qk_norm=arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Gemma3ForCausalLM"),
            hidden_act=hidden_act,
            config_dtype=_dtype(raw.get("dtype") or raw.get("torch_dtype")),
            attention=attention_pattern(raw, num_layers),
            eos_token_ids=tuple(dict.fromkeys(eos)),
            bos_token_id=raw.get("bos_token_id"),
            raw=raw,
            moe=_moe_config(raw, arch),
            quantization=quantization_config(raw.get("quantization_config"), arch),
            local_rope=rope_config(raw, "sliding_attention") if arch == "Gemma3ForCausalLM" else None,
        )


def supported_architecture(architectures: Sequence[str]) -> str:
    """The first of a config's ``architectures`` that runs on the decoder path."""
    for arch in architectures:
        if arch in SUPPORTED_ARCHITECTURES or arch in REWARD_ARCHITECTURES:
            return arch
    named = ", ".join(architectures) if architectures else "none named in config.json"
    supported = ", ".join(SUPPORTED_ARCHITECTURES + REWARD_ARCHITECTURES + ENCODER_ARCHITECTURES)
    raise UnsupportedModelError(f"unsupported architecture ({named}); supported: {supported}")


def _as_ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def _generation_eos(path: Path) -> tuple[int, ...]:
    gen = path / "generation_config.json"
    if not gen.is_file():
        return ()
    return _as_ids(json.loads(gen.read_text()).get("eos_token_id"))


def _moe_config(raw: dict[str, Any], arch: str) -> MoeConfig | None:
    if arch == "MixtralForCausalLM":
        # NOTE: Mixtral: every layer is MoE, experts as wide as ``intermediate_size``, and
        # its softmax over the top-k logits equals renormalised top-k probabilities.
        return MoeConfig(
            num_experts=int(raw["num_local_experts"]),
            top_k=int(raw["num_experts_per_tok"]),
            expert_intermediate_size=int(raw["intermediate_size"]),
            norm_topk_prob=True,
            shared_expert_intermediate_size=0,
            decoder_sparse_step=1,
            mlp_only_layers=(),
        )
    if arch not in ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM"):
        return None
    # NOTE: Hub Qwen-MoE configs say ``num_experts``; transformers 5 writes Qwen3-MoE's as
    # ``num_local_experts``.
    num_experts = raw.get("num_experts", raw.get("num_local_experts"))
    if not num_experts:
        return None
    shared = raw.get("shared_expert_intermediate_size") if arch == "Qwen2MoeForCausalLM" else 0
    return MoeConfig(
        num_experts=int(num_experts),
        top_k=int(raw["num_experts_per_tok"]),
        expert_intermediate_size=int(raw["moe_intermediate_size"]),
        norm_topk_prob=bool(raw.get("norm_topk_prob", False)),
        shared_expert_intermediate_size=int(shared or 0),
        decoder_sparse_step=int(raw.get("decoder_sparse_step") or 1),
        mlp_only_layers=tuple(int(i) for i in raw.get("mlp_only_layers") or ()),
    )


def _dtype(name: Any) -> torch.dtype:
    table = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    return table.get(str(name), torch.float32)
