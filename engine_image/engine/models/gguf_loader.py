"""Fills a Llama-family model from a GGUF file, its projections kept in their block formats.

The model is built as for safetensors; then each projection is replaced by a
``QuantizedLinear`` over the GGUF weights (q/k/v and gate/up fused as parts of one layer), the
embedding by a ``QuantizedEmbedding`` (whose ``as_linear`` is the tied head when the file has
no ``output.weight``), and the float norms are copied into the model's own parameters.
"""

from __future__ import annotations

import torch

from engine.core.errors import UnsupportedModelError
from engine.gguf.weights import GGUFWeights
from engine.layers.quantized_linear import QuantizedEmbedding, QuantizedLinear
from engine.layers.rmsnorm import RMSNorm
from engine.models.llama import MLP, DecoderLayer, LlamaFamilyForCausalLM


class _Placer:
    """Builds the quantized layers of one model on ``device`` in ``dtype``."""

    def __init__(self, weights: GGUFWeights, device: torch.device, dtype: torch.dtype) -> None:
        self.weights = weights
        self.device = device
        self.dtype = dtype

    def linear(self, names: list[str]) -> QuantizedLinear:
        """The projection fused from the GGUF weights ``names`` (``blk.0.attn_q``, ...)."""
        parts = [self.weights.matrix(f"{name}.weight") for name in names]
        biases = [f"{name}.bias" for name in names if f"{name}.bias" in self.weights]
        if biases and len(biases) != len(names):
            raise UnsupportedModelError(f"GGUF tensors {', '.join(names)} have biases for only some parts")
        bias = torch.cat([self.weights.vector(name) for name in biases]) if biases else None
        return QuantizedLinear(parts, bias, device=self.device, dtype=self.dtype)

    def norm(self, norm: RMSNorm | None, name: str) -> None:
        if norm is None:
            return
        with torch.no_grad():
            norm.weight.copy_(self.weights.vector(name))


def load_gguf_weights(
    model: LlamaFamilyForCausalLM, weights: GGUFWeights, device: torch.device, dtype: torch.dtype
) -> None:
    """Replaces ``model``'s projections and embedding by quantized ones from ``weights``."""
    if model.config.moe is not None or not model.has_lm_head:
        raise UnsupportedModelError(f"{model.config.architecture} cannot be loaded from a GGUF file")
    place = _Placer(weights, device, dtype)
    embedding = QuantizedEmbedding(weights.matrix("token_embd.weight"), device=device, dtype=dtype)
    model.embed_tokens = embedding
    for index, layer in enumerate(model.layers):
        assert isinstance(layer, DecoderLayer), "a Llama-family model is a stack of DecoderLayers"
        _load_layer(layer, f"blk.{index}", place)
        # NOTE: once the layer's blocks are repacked, its pages of the file need not stay resident.
        weights.release_pages()
    place.norm(model.norm, "output_norm.weight")
    model.lm_head = place.linear(["output"]) if "output.weight" in weights else embedding.as_linear()
    # NOTE: the config already holds the rotary frequency divisors (``rope_freqs``).
    weights.unread.discard("rope_freqs.weight")
    if weights.unread:
        extra = sorted(weights.unread)
        raise UnsupportedModelError(
            f"GGUF tensor {extra[0]} (and {len(extra) - 1} more) has no place in {model.config.architecture}"
        )


def _load_layer(layer: DecoderLayer, prefix: str, place: _Placer) -> None:
    attn = layer.self_attn
    attn.qkv_proj = place.linear([f"{prefix}.attn_q", f"{prefix}.attn_k", f"{prefix}.attn_v"])
    attn.o_proj = place.linear([f"{prefix}.attn_output"])
    assert isinstance(layer.mlp, MLP), "GGUF models are dense"
    layer.mlp.gate_up_proj = place.linear([f"{prefix}.ffn_gate", f"{prefix}.ffn_up"])
    layer.mlp.down_proj = place.linear([f"{prefix}.ffn_down"])
    place.norm(layer.input_layernorm, f"{prefix}.attn_norm.weight")
    place.norm(layer.post_attention_layernorm, f"{prefix}.ffn_norm.weight")
    place.norm(attn.q_norm, f"{prefix}.attn_q_norm.weight")
    place.norm(attn.k_norm, f"{prefix}.attn_k_norm.weight")
