"""A GGUF file's hyperparameters as the ``config.json`` a Hugging Face repository would hold.

The keys are llama.cpp's (``{arch}.embedding_length``, ``tokenizer.ggml.eos_token_id``, ...);
the dictionary this builds is what ``ModelConfig.from_dict`` reads and what the HTTP process
serves as the model's config, so one mapping feeds both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.config.model_config import ModelConfig
from engine.core.errors import UnsupportedModelError
from engine.gguf.header import GGUFHeader, read_header

# GGUF ``general.architecture`` → (Hugging Face architecture, model_type). Mistral's dense
# models are written as ``llama`` by llama.cpp's converter.
GGUF_ARCHITECTURES: dict[str, tuple[str, str]] = {
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
}
# The tokenizer's end-of-generation tokens besides eos (llama.cpp stops on all of them).
_END_TOKEN_KEYS = ("eos_token_id", "eot_token_id", "eom_token_id")


def field(header: GGUFHeader, key: str, default: Any = None) -> Any:
    """The value of metadata ``key`` (a scalar, string or list), or ``default``."""
    return header.metadata.get(key, default)


def architecture(header: GGUFHeader) -> str:
    """The file's ``general.architecture``; raises for one the engine cannot run."""
    arch = str(field(header, "general.architecture", "none"))
    if arch not in GGUF_ARCHITECTURES:
        supported = ", ".join(GGUF_ARCHITECTURES)
        raise UnsupportedModelError(f"GGUF architecture {arch!r} is not supported (supported: {supported})")
    experts = field(header, f"{arch}.expert_count", 0)
    if experts:
        raise UnsupportedModelError(f"GGUF mixture-of-experts models are not supported ({arch} with {experts} experts)")
    return arch


def hf_config(header: GGUFHeader) -> dict[str, Any]:
    """The ``config.json`` of the model in ``header``; raises for what the engine cannot run."""
    arch = architecture(header)
    hf_arch, model_type = GGUF_ARCHITECTURES[arch]
    tensors = header.tensors
    hidden = int(field(header, f"{arch}.embedding_length"))
    num_heads = int(field(header, f"{arch}.attention.head_count"))
    head_dim = int(field(header, f"{arch}.attention.key_length", hidden // num_heads))
    rotary_dim = int(field(header, f"{arch}.rope.dimension_count", head_dim))
    if rotary_dim != head_dim:
        raise UnsupportedModelError(f"GGUF rotary over {rotary_dim} of {head_dim} head dimensions is not supported")
    tokenizer = {key: field(header, f"tokenizer.ggml.{key}") for key in ("bos_token_id", *_END_TOKEN_KEYS)}
    # NOTE: the embedding's rows, not ``{arch}.vocab_size``, which older files omit.
    vocab = int(tensors["token_embd.weight"].shape[-1]) if "token_embd.weight" in tensors else None
    config: dict[str, Any] = {
        "architectures": [hf_arch],
        "model_type": model_type,
        "vocab_size": vocab or int(field(header, f"{arch}.vocab_size")),
        "hidden_size": hidden,
        "intermediate_size": int(field(header, f"{arch}.feed_forward_length")),
        "num_hidden_layers": int(field(header, f"{arch}.block_count")),
        "num_attention_heads": num_heads,
        "num_key_value_heads": _kv_heads(header, arch, num_heads),
        "head_dim": head_dim,
        "rms_norm_eps": float(field(header, f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        "rope_theta": float(field(header, f"{arch}.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(field(header, f"{arch}.context_length", 2048)),
        "tie_word_embeddings": "output.weight" not in tensors,
        "attention_bias": arch == "llama" and "blk.0.attn_q.bias" in tensors,
        "hidden_act": "silu",
        "bos_token_id": tokenizer["bos_token_id"],
        "eos_token_id": list(dict.fromkeys(int(v) for k, v in tokenizer.items() if k != "bos_token_id" and v is not None)),
    }
    scaling = _rope_scaling(header, arch)
    if scaling is not None:
        config["rope_scaling"] = scaling
    if "rope_freqs.weight" in tensors:
        # NOTE: how llama.cpp stores Llama 3.1's rope scaling: a divisor per frequency.
        config["rope_freq_factors"] = header.float_values("rope_freqs.weight")
    return config


def _kv_heads(header: GGUFHeader, arch: str, num_heads: int) -> int:
    value = field(header, f"{arch}.attention.head_count_kv", num_heads)
    if isinstance(value, list):
        if len(set(value)) != 1:
            raise UnsupportedModelError("GGUF models with a different KV head count per layer are not supported")
        value = value[0]
    return int(value)


def _rope_scaling(header: GGUFHeader, arch: str) -> dict[str, Any] | None:
    kind = str(field(header, f"{arch}.rope.scaling.type", "none"))
    if kind == "none":
        return None
    scaling: dict[str, Any] = {"rope_type": kind, "factor": float(field(header, f"{arch}.rope.scaling.factor", 1.0))}
    original = field(header, f"{arch}.rope.scaling.original_context_length")
    if original is not None:
        scaling["original_max_position_embeddings"] = int(original)
    return scaling


def gguf_model_config(path: Path) -> ModelConfig:
    """The engine's view of the GGUF model at ``path``; raises for what the engine cannot run."""
    return ModelConfig.from_dict(hf_config(read_header(path)), str(path))
