"""Gemma 2 and Gemma 3 (text) decoders: the Llama attention and MLP (GeGLU) inside Gemma's
layer of four norms, with its embedding scale, logit soft-capping and (Gemma 3) a rotary
base of their own for the sliding-window layers."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from engine.attention.base import AttentionBackend
from engine.config.model_config import ModelConfig
from engine.core.forward_batch import ForwardBatch
from engine.layers.rmsnorm import RMSNorm
from engine.layers.rotary import RopeAngles, RotaryEmbedding
from engine.models.llama import MLP, Attention, LlamaFamilyForCausalLM


class GemmaDecoderLayer(nn.Module):
    """``h += post_attn_norm(attn(input_norm(h))); h += post_ff_norm(mlp(pre_ff_norm(h)))``."""

    def __init__(self, config: ModelConfig, layer_id: int) -> None:
        super().__init__()
        self.self_attn = Attention(config, layer_id)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.pre_feedforward_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_feedforward_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.sliding = config.attention.window(layer_id) is not None

    def forward(
        self,
        hidden: torch.Tensor,
        residual: torch.Tensor | None,
        batch: ForwardBatch,
        backend: AttentionBackend,
        rope: RopeAngles,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (this layer's last output, the residual stream before it), as the Llama
        layer does: the residual add is deferred into the next norm."""
        if residual is None:
            residual = hidden
            hidden = self.input_layernorm(hidden)
        else:
            hidden, residual = self.input_layernorm.add_and_norm(hidden, residual)
        attended = self.post_attention_layernorm(self.self_attn(hidden, batch, backend, rope))
        hidden, residual = self.pre_feedforward_layernorm.add_and_norm(attended, residual)
        return self.post_feedforward_layernorm(self.mlp(hidden)), residual


class GemmaForCausalLM(LlamaFamilyForCausalLM):
    decoder_layer = GemmaDecoderLayer

    def __init__(self, config: ModelConfig, rotary: RotaryEmbedding) -> None:
        super().__init__(config, rotary)
        # NOTE: Gemma 3's sliding layers rotate with their own base (None: every layer shares one).
        # Its cache is data, computed on the CPU even while the model is built on the meta device.
        self.local_rotary: RotaryEmbedding | None = None
        if config.local_rope is not None:
            with torch.device("cpu"):
                self.local_rotary = RotaryEmbedding(
                    config.local_rope, config.head_dim, rotary.cos_cache.shape[0], rotary.cos_cache.device
                )

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, backend: AttentionBackend) -> torch.Tensor:
        logits = super().forward(batch, backend)
        cap = self.config.attention.final_logit_cap
        if cap is None:
            return logits
        return torch.tanh(logits / cap) * cap

    @torch.inference_mode()
    def last_hidden(self, batch: ForwardBatch, backend: AttentionBackend) -> torch.Tensor:
        backend.init_forward_metadata(batch)
        hidden = self.embed_tokens(batch.input_ids)
        # NOTE: as transformers: the scale rounded to the activations' dtype first (a host
        # scalar: nothing for a CUDA graph to capture).
        hidden = hidden * torch.tensor(self.config.hidden_size**0.5, dtype=hidden.dtype).item()
        rope = self.rotary.lookup(batch.positions, hidden.dtype)
        local = rope if self.local_rotary is None else self.local_rotary.lookup(batch.positions, hidden.dtype)
        residual: torch.Tensor | None = None
        for layer in self.layers:
            assert isinstance(layer, GemmaDecoderLayer)
            hidden, residual = layer(hidden, residual, batch, backend, local if layer.sliding else rope)
        assert residual is not None, "a model has at least one layer"
        last = batch.last_token_indices
        normed, _ = self.norm.add_and_norm(hidden[last], residual[last])
        return normed

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        super().load_weights(weights)
        # NOTE: Gemma's RMSNorm scales by (1 + weight): stored so, our RMSNorm computes it.
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, RMSNorm):
                    module.weight.add_(1.0)
