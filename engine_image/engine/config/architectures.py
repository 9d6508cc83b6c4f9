"""The Hugging Face ``architectures`` names the engine runs, by the kind of model each is.

NOTE: imports nothing, so the config layer validates a model's architecture without
importing model code; ``engine.models.registry`` maps these names to the model classes.
"""

from __future__ import annotations

from collections.abc import Sequence

# NOTE: one decoder implementation covers the Llama family; the differences (q/k/v bias,
# per-head q/k norm, sliding windows) are read from ModelConfig.
SUPPORTED_ARCHITECTURES: tuple[str, ...] = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    # NOTE: the MoE kin: the same decoder with models/moe.py's block as (some layers') MLP.
    "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM",
    "MixtralForCausalLM",
    # NOTE: Phi-3 is the Llama decoder with its projections fused in the checkpoint already.
    "Phi3ForCausalLM",
    # NOTE: Gemma's own decoder layer (models/gemma.py): four norms, soft-capping, GeGLU.
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
)

# NOTE: the decoders whose checkpoints hold q/k/v and gate/up as separate tensors of the Llama
# layer: the quantized (int4, FP8) loader replaces those projections and the tensor-parallel
# shard plan splits them. Phi-3 stores them fused; Gemma's layer is its own.
SPLIT_PROJECTION_DECODERS: tuple[str, ...] = (
    "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
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
