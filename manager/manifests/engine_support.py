"""What each engine kind serves, judged from a model's config.json before anything downloads.

NOTE: the gomgr lists must equal the engine's own tables (`engine.config.architectures`,
`engine.config.model_config`'s RoPE types, `engine.config.quantization`'s int4 variants,
`engine.config.fp8_quantization`'s FP8 ones; a test checks it); copied because manager/
never imports the engine package. The upstream lists are what their docs name: vLLM and
SGLang serve any architecture Transformers knows (vLLM through its Transformers backend),
so only a quantization method or a config without architectures can rule them out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

GOMGR_ARCHITECTURES = frozenset({
    # the decoders
    "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
    "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "Phi3ForCausalLM",
    "Gemma2ForCausalLM", "Gemma3ForCausalLM",
    # reward models, embedding models and rerankers
    "LlamaForSequenceClassification", "BertModel", "BertForSequenceClassification",
    "XLMRobertaForSequenceClassification",
})
# NOTE: the engine's GGUF loader (`engine.gguf.hparams.GGUF_ARCHITECTURES`), by GGUF name.
GOMGR_GGUF_ARCHITECTURES = frozenset({"llama", "qwen2", "qwen3"})
GOMGR_ROPE_TYPES = frozenset({"default", "linear", "llama3", "yarn", "longrope", "su"})
# NOTE: the engine's int4 tables (`engine.config.quantization`): AWQ in its GEMM layout and
# GPTQ v1, 4 bits, these group sizes; every other variant of the two goes upstream.
GOMGR_QUANTIZATIONS = frozenset({"awq", "gptq", "fp8", "compressed-tensors"})
GOMGR_INT4_BITS = 4
GOMGR_AWQ_VERSIONS = frozenset({"gemm"})
GOMGR_GPTQ_FORMATS = frozenset({"gptq"})
GOMGR_GROUP_SIZES = frozenset({-1, 32, 64, 128})
GOMGR_INT4_ARCHITECTURES = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"})
# NOTE: the engine's FP8 tables (`engine.config.fp8_quantization`): the fp8 method in e4m3 with
# dynamic activations, per tensor or per 128x128 block; compressed-tensors' float-quantized
# 8-bit float weights per tensor or channel, activations dynamic or absent.
GOMGR_FP8_METHODS = frozenset({"fp8", "compressed-tensors"})
GOMGR_FP8_FORMATS = frozenset({"e4m3"})
GOMGR_FP8_BLOCK_SIZES = frozenset({(128, 128)})
GOMGR_FP8_ACTIVATION_SCHEMES = frozenset({"dynamic"})
GOMGR_COMPRESSED_TENSORS_FORMATS = frozenset({"float-quantized"})
GOMGR_COMPRESSED_TENSORS_STRATEGIES = frozenset({"tensor", "channel"})
GOMGR_FP8_ARCHITECTURES = GOMGR_INT4_ARCHITECTURES
# NOTE: `quantization_config.quant_method` values (GGUF files carry no config.json).
_UPSTREAM_QUANTIZATIONS = frozenset({
    "awq", "awq_marlin", "gptq", "gptq_marlin", "marlin", "fp8", "fbgemm_fp8",
    "compressed-tensors", "bitsandbytes", "modelopt", "modelopt_fp4", "experts_int8", "mxfp4",
    "quark", "torchao", "moe_wna16",
})
QUANTIZATIONS: dict[str, frozenset[str]] = {
    "gomgr": GOMGR_QUANTIZATIONS,
    "vllm": _UPSTREAM_QUANTIZATIONS,
    "sglang": _UPSTREAM_QUANTIZATIONS,
}


@dataclass(frozen=True)
class ModelTraits:
    """What config.json says that decides which engine can serve a model; None: not known
    (no config.json yet, or a GGUF file, whose own checks run in the engine)."""

    architecture: str | None = None
    quantization: str | None = None
    rope_type: str | None = None
    # NOTE: what of an awq/gptq/fp8/compressed-tensors `quantization_config` gomgr's engine
    # does not load (e.g. "awq version 'gemv'"); None where it loads it, or for other methods.
    quantization_gap: str | None = None
    # NOTE: a GGUF file's `general.architecture` (llama.cpp's name); None for other formats.
    gguf_architecture: str | None = None

    @classmethod
    def from_config(cls, config: object) -> ModelTraits:
        if not isinstance(config, dict):
            return cls()
        architectures = config.get("architectures")
        architecture = None
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
            architecture = architectures[0]
        quantization = config.get("quantization_config")
        method = quantization.get("quant_method") if isinstance(quantization, dict) else None
        # NOTE: as the engine reads it: transformers 5's `rope_parameters` over `rope_scaling`.
        rope_fields = {
            key: value
            for section in ("rope_scaling", "rope_parameters")
            if isinstance(config.get(section), dict)
            for key, value in config[section].items()
        }
        rope = rope_fields.get("rope_type", rope_fields.get("type"))
        return cls(
            architecture=architecture,
            quantization=str(method) if method is not None else None,
            rope_type=str(rope) if rope is not None else None,
            quantization_gap=_quantization_gap(quantization, architecture) if isinstance(quantization, dict) else None,
        )

    @classmethod
    def of_directory(cls, model_dir: Path) -> ModelTraits:
        try:
            return cls.from_config(json.loads((model_dir / "config.json").read_text("utf-8")))
        except (OSError, ValueError):
            return cls()


def unserved_by(engine: str, traits: ModelTraits) -> str | None:
    """What of `traits` the engine kind does not serve (e.g. "quantization 'awq'"), or None."""
    if traits.quantization is not None and traits.quantization not in QUANTIZATIONS[engine]:
        return f"quantization {traits.quantization!r}"
    if engine != "gomgr":
        return None
    if traits.quantization_gap is not None:
        return traits.quantization_gap
    if traits.gguf_architecture is not None and traits.gguf_architecture not in GOMGR_GGUF_ARCHITECTURES:
        return f"GGUF architecture {traits.gguf_architecture!r}"
    if traits.architecture is not None and traits.architecture not in GOMGR_ARCHITECTURES:
        return f"architecture {traits.architecture!r}"
    if traits.rope_type is not None and traits.rope_type not in GOMGR_ROPE_TYPES:
        return f"RoPE type {traits.rope_type!r}"
    return None


def _quantization_gap(config: dict[str, object], architecture: str | None) -> str | None:
    """As the engine's `quantization_config` refuses: the first thing of a config of one of its
    methods that it does not load."""
    method = str(config.get("quant_method", "")).lower()
    if method in GOMGR_FP8_METHODS:
        if architecture is not None and architecture not in GOMGR_FP8_ARCHITECTURES:
            return f"{method} checkpoints of {architecture!r}"
        return _fp8_gap(config) if method == "fp8" else _compressed_tensors_gap(config)
    if method not in GOMGR_QUANTIZATIONS:
        return None
    if architecture is not None and architecture not in GOMGR_INT4_ARCHITECTURES:
        return f"{method} checkpoints of {architecture!r}"
    bits = config.get("bits", config.get("w_bit"))
    if bits != GOMGR_INT4_BITS:
        return f"{method} with bits {bits!r}"
    group_size = config.get("group_size", config.get("q_group_size"))
    if group_size not in GOMGR_GROUP_SIZES:
        return f"{method} with group_size {group_size!r}"
    if method == "awq":
        version = str(config.get("version", "gemm")).lower()
        if version not in GOMGR_AWQ_VERSIONS:
            return f"awq version {version!r}"
        return None if config.get("zero_point", True) is True else "awq without zero_point"
    checkpoint_format = str(config.get("checkpoint_format", "gptq")).lower()
    return None if checkpoint_format in GOMGR_GPTQ_FORMATS else f"gptq checkpoint_format {checkpoint_format!r}"


def _fp8_gap(config: dict[str, object]) -> str | None:
    fmt = str(config.get("fmt", "e4m3")).lower()
    if fmt not in GOMGR_FP8_FORMATS:
        return f"fp8 weights in {fmt}"
    scheme = str(config.get("activation_scheme", "dynamic")).lower()
    if scheme not in GOMGR_FP8_ACTIVATION_SCHEMES:
        return f"fp8 with activation_scheme {scheme!r}"
    block = config.get("weight_block_size")
    if block is not None and (not isinstance(block, list) or tuple(block) not in GOMGR_FP8_BLOCK_SIZES):
        return f"fp8 with weight_block_size {block!r}"
    return None


def _compressed_tensors_gap(config: dict[str, object]) -> str | None:
    fmt = config.get("format")
    if fmt not in GOMGR_COMPRESSED_TENSORS_FORMATS:
        return f"compressed-tensors format {fmt!r}"
    groups = config.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        return "compressed-tensors with other than one config group"
    group = next(iter(groups.values()))
    weights = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(weights, dict):
        return "compressed-tensors config group without weights"
    if (weights.get("type"), weights.get("num_bits")) != ("float", 8):
        return f"compressed-tensors with {weights.get('type')} {weights.get('num_bits')}-bit weights"
    if str(weights.get("strategy")) not in GOMGR_COMPRESSED_TENSORS_STRATEGIES:
        return f"compressed-tensors FP8 with weight strategy {weights.get('strategy')!r}"
    if weights.get("dynamic", False) or not weights.get("symmetric", True):
        return "compressed-tensors FP8 with dynamic or asymmetric weights"
    activations = group.get("input_activations")
    if isinstance(activations, dict) and not activations.get("dynamic", False):
        return "compressed-tensors FP8 with static input activation scales"
    return None
