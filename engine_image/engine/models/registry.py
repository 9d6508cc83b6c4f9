"""Maps the decoder architectures of ``engine.config.architectures`` to the model classes."""

from __future__ import annotations

from engine.config.architectures import REWARD_ARCHITECTURES
from engine.config.model_config import supported_architecture
from engine.models.gemma import GemmaForCausalLM
from engine.models.llama import LlamaFamilyForCausalLM
from engine.models.llama_classification import LlamaFamilyForSequenceClassification

_GEMMA_ARCHITECTURES = ("Gemma2ForCausalLM", "Gemma3ForCausalLM")


def model_class(architecture: str) -> type[LlamaFamilyForCausalLM]:
    supported_architecture([architecture])
    if architecture in REWARD_ARCHITECTURES:
        return LlamaFamilyForSequenceClassification
    if architecture in _GEMMA_ARCHITECTURES:
        return GemmaForCausalLM
    return LlamaFamilyForCausalLM
