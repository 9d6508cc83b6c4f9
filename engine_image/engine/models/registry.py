"""Maps Hugging Face ``architectures`` names to the engine's model classes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

# NOTE: one decoder implementation covers the whole Llama family; the differences
# (q/k/v bias, per-head q/k norm) are read from ModelConfig.
SUPPORTED_ARCHITECTURES: tuple[str, ...] = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
)

# NOTE: encoders run without the KV pool and the decode loop: embedding servers only.
ENCODER_ARCHITECTURES: tuple[str, ...] = ("BertModel",)


def is_encoder(architectures: Sequence[str]) -> bool:
    return any(arch in ENCODER_ARCHITECTURES for arch in architectures)


def supported_architecture(architectures: Sequence[str]) -> str:
    from engine.config.model_config import UnsupportedModelError

    for arch in architectures:
        if arch in SUPPORTED_ARCHITECTURES:
            return arch
    named = ", ".join(architectures) if architectures else "none named in config.json"
    supported = ", ".join(SUPPORTED_ARCHITECTURES + ENCODER_ARCHITECTURES)
    raise UnsupportedModelError(f"unsupported architecture ({named}); supported: {supported}")


def model_class(architecture: str) -> type[nn.Module]:
    from engine.models.llama import LlamaFamilyForCausalLM

    supported_architecture([architecture])
    return LlamaFamilyForCausalLM
