"""Maps Hugging Face ``architectures`` names to the engine's model classes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.models.llama import LlamaFamilyForCausalLM

# NOTE: one decoder implementation covers the whole Llama family; the differences
# (q/k/v bias, per-head q/k norm) are read from ModelConfig.
SUPPORTED_ARCHITECTURES: tuple[str, ...] = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    # NOTE: the MoE kin: the same decoder with models/moe.py's block as (some layers') MLP.
    "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM",
    "MixtralForCausalLM",
)

# NOTE: sequence-classification models score inputs and never generate text: cross-encoders
# (rerankers) run on the encoder path, reward models on the decoder path.
CROSS_ENCODER_ARCHITECTURES: tuple[str, ...] = (
    "BertForSequenceClassification",
    "XLMRobertaForSequenceClassification",
)
REWARD_ARCHITECTURES: tuple[str, ...] = ("LlamaForSequenceClassification",)

# NOTE: encoders run without the KV pool and the decode loop: embedding and rerank servers only.
ENCODER_ARCHITECTURES: tuple[str, ...] = ("BertModel", *CROSS_ENCODER_ARCHITECTURES)


def is_encoder(architectures: Sequence[str]) -> bool:
    return any(arch in ENCODER_ARCHITECTURES for arch in architectures)


def is_classifier(architectures: Sequence[str]) -> bool:
    return any(arch in CROSS_ENCODER_ARCHITECTURES + REWARD_ARCHITECTURES for arch in architectures)


def supported_architecture(architectures: Sequence[str]) -> str:
    from engine.config.model_config import UnsupportedModelError

    for arch in architectures:
        if arch in SUPPORTED_ARCHITECTURES or arch in REWARD_ARCHITECTURES:
            return arch
    named = ", ".join(architectures) if architectures else "none named in config.json"
    supported = ", ".join(SUPPORTED_ARCHITECTURES + REWARD_ARCHITECTURES + ENCODER_ARCHITECTURES)
    raise UnsupportedModelError(f"unsupported architecture ({named}); supported: {supported}")


def model_class(architecture: str) -> type[LlamaFamilyForCausalLM]:
    from engine.models.llama import LlamaFamilyForCausalLM

    supported_architecture([architecture])
    if architecture in REWARD_ARCHITECTURES:
        from engine.models.llama_classification import LlamaFamilyForSequenceClassification

        return LlamaFamilyForSequenceClassification
    return LlamaFamilyForCausalLM
