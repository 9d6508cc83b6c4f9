"""A GGUF file's hyperparameters as the ``config.json`` a Hugging Face repository would hold.

The keys are llama.cpp's (``{arch}.embedding_length``, ``tokenizer.ggml.eos_token_id``, ...);
the dictionary this builds is what ``ModelConfig.from_dict`` reads and what the HTTP process
serves as the model's config, so one mapping feeds both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gguf import GGUFReader

from engine.config.model_config import ModelConfig
from engine.core.errors import UnsupportedModelError

# GGUF ``general.architecture`` → (Hugging Face architecture, model_type). Mistral's dense
# models are written as ``llama`` by llama.cpp's converter.
GGUF_ARCHITECTURES: dict[str, tuple[str, str]] = {
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
}
# The tokenizer's end-of-generation tokens besides eos (llama.cpp stops on all of them).
_END_TOKEN_KEYS = ("eos_token_id", "eot_token_id", "eom_token_id")


def field(reader: GGUFReader, key: str, default: Any = None) -> Any:
    """The value of metadata ``key`` (a scalar, string or list), or ``default``."""
    found = reader.fields.get(key)
    return default if found is None else found.contents()


def architecture(reader: GGUFReader) -> str:
    """The file's ``general.architecture``; raises for one the engine cannot run."""
    arch = str(field(reader, "general.architecture", "none"))
    if arch not in GGUF_ARCHITECTURES:
        supported = ", ".join(GGUF_ARCHITECTURES)
        raise UnsupportedModelError(f"GGUF architecture {arch!r} is not supported (supported: {supported})")
    experts = field(reader, f"{arch}.expert_count", 0)
    if experts:
        raise UnsupportedModelError(f"GGUF mixture-of-experts models are not supported ({arch} with {experts} experts)")
    return arch


def hf_config(reader: GGUFReader) -> dict[str, Any]:
    """The ``config.json`` of the model in ``reader``; raises for what the engine cannot run."""
    arch = architecture(reader)
    hf_arch, model_type = GGUF_ARCHITECTURES[arch]
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    hidden = int(field(reader, f"{arch}.embedding_length"))
    num_heads = int(field(reader, f"{arch}.attention.head_count"))
    head_dim = int(field(reader, f"{arch}.attention.key_length", hidden // num_heads))
    rotary_dim = int(field(reader, f"{arch}.rope.dimension_count", head_dim))
    if rotary_dim != head_dim:
        raise UnsupportedModelError(f"GGUF rotary over {rotary_dim} of {head_dim} head dimensions is not supported")
    tokenizer = {key: field(reader, f"tokenizer.ggml.{key}") for key in ("bos_token_id", *_END_TOKEN_KEYS)}
    # NOTE: the embedding's rows, not ``{arch}.vocab_size``, which older files omit.
    vocab = int(tensors["token_embd.weight"].shape[-1]) if "token_embd.weight" in tensors else None
    config: dict[str, Any] = {
        "architectures": [hf_arch],
        "model_type": model_type,
        "vocab_size": vocab or int(field(reader, f"{arch}.vocab_size")),
        "hidden_size": hidden,
        "intermediate_size": int(field(reader, f"{arch}.feed_forward_length")),
        "num_hidden_layers": int(field(reader, f"{arch}.block_count")),
        "num_attention_heads": num_heads,
        "num_key_value_heads": _kv_heads(reader, arch, num_heads),
        "head_dim": head_dim,
        "rms_norm_eps": float(field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        "rope_theta": float(field(reader, f"{arch}.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(field(reader, f"{arch}.context_length", 2048)),
        "tie_word_embeddings": "output.weight" not in tensors,
        "attention_bias": arch == "llama" and "blk.0.attn_q.bias" in tensors,
        "hidden_act": "silu",
        "bos_token_id": tokenizer["bos_token_id"],
        "eos_token_id": list(dict.fromkeys(int(v) for k, v in tokenizer.items() if k != "bos_token_id" and v is not None)),
    }
    scaling = _rope_scaling(reader, arch)
    if scaling is not None:
        config["rope_scaling"] = scaling
    if "rope_freqs.weight" in tensors:
        # NOTE: how llama.cpp stores Llama 3.1's rope scaling: a divisor per frequency.
        config["rope_freq_factors"] = [float(v) for v in tensors["rope_freqs.weight"].data]
    return config


def _kv_heads(reader: GGUFReader, arch: str, num_heads: int) -> int:
    value = field(reader, f"{arch}.attention.head_count_kv", num_heads)
    if isinstance(value, list):
        if len(set(value)) != 1:
            raise UnsupportedModelError("GGUF models with a different KV head count per layer are not supported")
        value = value[0]
    return int(value)


def _rope_scaling(reader: GGUFReader, arch: str) -> dict[str, Any] | None:
    kind = str(field(reader, f"{arch}.rope.scaling.type", "none"))
    if kind == "none":
        return None
    scaling: dict[str, Any] = {"rope_type": kind, "factor": float(field(reader, f"{arch}.rope.scaling.factor", 1.0))}
    original = field(reader, f"{arch}.rope.scaling.original_context_length")
    if original is not None:
        scaling["original_max_position_embeddings"] = int(original)
    return scaling


def gguf_model_config(path: Path) -> ModelConfig:
    """The engine's view of the GGUF model at ``path``; raises for what the engine cannot run."""
    return ModelConfig.from_dict(hf_config(GGUFReader(path, "r")), str(path))
