"""Maps the decoder architectures of ``engine.config.architectures`` to the model classes."""

from __future__ import annotations

from engine.config.architectures import REWARD_ARCHITECTURES
from engine.config.model_config import supported_architecture
from engine.models.llama import LlamaFamilyForCausalLM
from engine.models.llama_classification import LlamaFamilyForSequenceClassification


def model_class(architecture: str) -> type[LlamaFamilyForCausalLM]:
    supported_architecture([architecture])
    if architecture in REWARD_ARCHITECTURES:
        return LlamaFamilyForSequenceClassification
    return LlamaFamilyForCausalLM
