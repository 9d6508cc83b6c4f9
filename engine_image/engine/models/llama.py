"""Llama-family decoder (Llama 2/3, Mistral, Qwen2/2.5, Qwen3, Phi-3, and the MoE kin
Qwen2-MoE, Qwen3-MoE and Mixtral) over a token-level KV pool."""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from engine.attention.base import AttentionBackend, LayerAttention
from engine.config.model_config import ModelConfig
from engine.core.forward_batch import ForwardBatch
from engine.kernels.cpu import cpu_kernels_for
from engine.kernels.triton import use_triton_kernels
from engine.layers.packed_linear import PackedEmbedding, PackedLinear, pack_linear_layers
from engine.layers.quantized_linear import QuantizedEmbedding, QuantizedLinear
from engine.layers.rmsnorm import RMSNorm
from engine.layers.rotary import RopeAngles, RotaryEmbedding
from engine.models.moe import (
    ExpertShard,
    SparseMoeBlock,
    expert_checkpoint_name,
    expert_shard_view,
    expert_shards,
    expert_target,
    is_stacked_expert_param,
)
from engine.models.quantized_decode_stack import QuantizedDecodeStack, StackLayer


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer_id: int) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        self.q_size = config.num_heads * config.head_dim
        self.kv_size = config.num_kv_heads * config.head_dim
        # NOTE: nn.Module slots: pack_for_cpu and the GGUF loader put other linear layers here.
        self.qkv_proj: nn.Module = nn.Linear(
            config.hidden_size, self.q_size + 2 * self.kv_size, bias=config.attention_bias
        )
        self.o_proj: nn.Module = nn.Linear(self.q_size, config.hidden_size, bias=config.o_proj_bias)
        self.q_norm = RMSNorm(config.head_dim, config.rms_norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(config.head_dim, config.rms_norm_eps) if config.qk_norm else None
        pattern = config.attention
        self.attention = LayerAttention(pattern.window(layer_id), pattern.logit_cap, pattern.scale)

    def forward(
        self, hidden: torch.Tensor, batch: ForwardBatch, backend: AttentionBackend, rope: RopeAngles
    ) -> torch.Tensor:
        qkv: torch.Tensor = self.qkv_proj(hidden)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        if self.q_norm is None and not use_triton_kernels(qkv) and not backend.fuses_rope:
            # NOTE: q's and k's heads lie side by side in qkv: one rotation covers both.
            heads = qkv[:, : self.q_size + self.kv_size].view(-1, self.num_heads + self.num_kv_heads, self.head_dim)
            q, k = rope.rotate_heads(heads).split([self.num_heads, self.num_kv_heads], dim=1)
            attended = backend.forward(q, k, v, self.layer_id, batch, self.attention)
        else:
            q = q.view(-1, self.num_heads, self.head_dim)
            k = k.view(-1, self.num_kv_heads, self.head_dim)
            if self.q_norm is not None and self.k_norm is not None:
                q, k = self.q_norm(q), self.k_norm(k)
            # NOTE: the backend rotates q and k (on CUDA the Triton backend as it writes the pool).
            attended = backend.forward_rope(q, k, v, rope, self.layer_id, batch, self.attention)
        out: torch.Tensor = self.o_proj(attended)
        return out


class MLP(nn.Module):
    def __init__(self, config: ModelConfig, intermediate_size: int | None = None) -> None:
        super().__init__()
        self.intermediate_size = intermediate_size or config.intermediate_size
        self.gelu = config.hidden_act == "gelu_pytorch_tanh"  # NOTE: Gemma's GeGLU; else SiLU
        self.gate_up_proj: nn.Module = nn.Linear(
            config.hidden_size, 2 * self.intermediate_size, bias=config.mlp_bias
        )
        self.down_proj: nn.Module = nn.Linear(self.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # NOTE: packed GGUF weights multiply and gate in one kernel call (the decode stack's too).
        gated = None
        if isinstance(self.gate_up_proj, QuantizedLinear) and not self.gelu:
            gated = self.gate_up_proj.gated(x)
        if gated is None:
            gate_up = self.gate_up_proj(x)
            gated = self._gelu_and_mul(gate_up) if self.gelu else self._silu_and_mul(gate_up)
        out: torch.Tensor = self.down_proj(gated)
        return out

    def _gelu_and_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        gate, up = gate_up.split(self.intermediate_size, dim=-1)
        return F.gelu(gate, approximate="tanh").mul_(up)

    def _silu_and_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        if use_triton_kernels(gate_up):
            # NOTE: imported here, on CUDA only: importing it imports triton.
            from engine.kernels.triton.activation import silu_and_mul

            return silu_and_mul(gate_up)
        kernels = cpu_kernels_for(gate_up)
        if kernels is not None:
            out = gate_up.new_empty((*gate_up.shape[:-1], self.intermediate_size))
            kernels.silu_and_mul(gate_up, out)
            return out
        gate, up = gate_up.split(self.intermediate_size, dim=-1)
        return F.silu(gate).mul_(up)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer_id: int) -> None:
        super().__init__()
        self.self_attn = Attention(config, layer_id)
        self.mlp = _mlp(config, layer_id)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        hidden: torch.Tensor,
        residual: torch.Tensor | None,
        batch: ForwardBatch,
        backend: AttentionBackend,
        rope: RopeAngles,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (this layer's MLP output, the residual stream before it).

        NOTE: the residual add is deferred into the next norm (SGLang's layout), so on
        CUDA add and norm run as one fused kernel; the sums are the same as
        ``h = h + attn(norm(h)); h = h + mlp(norm(h))``.
        """
        if residual is None:
            residual = hidden
            hidden = self.input_layernorm(hidden)
        else:
            hidden, residual = self.input_layernorm.add_and_norm(hidden, residual)
        hidden = self.self_attn(hidden, batch, backend, rope)
        hidden, residual = self.post_attention_layernorm.add_and_norm(hidden, residual)
        return self.mlp(hidden), residual

    def stack_layer(self) -> StackLayer | None:
        """This layer for the one-call decode stack; None unless every projection is quantized."""
        attn, mlp = self.self_attn, self.mlp
        if not isinstance(mlp, MLP):
            return None
        qkv, o, gate_up, down = attn.qkv_proj, attn.o_proj, mlp.gate_up_proj, mlp.down_proj
        if not (
            isinstance(qkv, QuantizedLinear) and isinstance(o, QuantizedLinear)
            and isinstance(gate_up, QuantizedLinear) and isinstance(down, QuantizedLinear)
        ):
            return None
        return StackLayer((qkv, o, gate_up, down), self.input_layernorm.weight, self.post_attention_layernorm.weight)


def _mlp(config: ModelConfig, layer_id: int) -> nn.Module:
    moe = config.moe
    if moe is None or not moe.is_moe_layer(layer_id):
        return MLP(config)
    size = moe.shared_expert_intermediate_size
    return SparseMoeBlock(moe, config.hidden_size, layer_id, MLP(config, size) if size else None)


# A parameter's part filled by one checkpoint tensor: the whole (None), a shard of a fused
# projection (q/k/v, gate/up), or one expert's part of the stacked expert weights.
Shard = int | ExpertShard | None

# (checkpoint name part, fused parameter, shard index) for projections we store fused.
_FUSED_SHARDS: tuple[tuple[str, str, int], ...] = (
    ("q_proj", "qkv_proj", 0),
    ("k_proj", "qkv_proj", 1),
    ("v_proj", "qkv_proj", 2),
    ("gate_proj", "gate_up_proj", 0),
    ("up_proj", "gate_up_proj", 1),
)


class LlamaFamilyForCausalLM(nn.Module):
    # NOTE: a family whose layer differs (Gemma) names its own; the constructor is the same.
    decoder_layer: type[nn.Module] = DecoderLayer

    def __init__(self, config: ModelConfig, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.config = config
        self.rotary = rotary
        # NOTE: the GGUF loader puts a QuantizedEmbedding here, and always sets lm_head. The
        # weight is given, so no random init runs: on the meta device nn.Embedding's normal_
        # imports triton through torch's Python kernels (~40 MiB resident for nothing).
        self.embed_tokens: nn.Embedding | QuantizedEmbedding | PackedEmbedding = nn.Embedding(
            config.vocab_size, config.hidden_size, _weight=torch.empty(config.vocab_size, config.hidden_size)
        )
        self.layers = nn.ModuleList(self.decoder_layer(config, i) for i in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        # NOTE: pack_for_cpu swaps the head (the tied one included) for a PackedLinear.
        # NOTE: with tensor parallelism, a distributed ParallelLMHead (the tied one included).
        self.lm_head: nn.Module | None = (
            None if config.tie_word_embeddings else nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        )
        # NOTE: built at the first decode step (the GGUF loader swaps the layers in after
        # __init__); None: the Python layers run every step.
        self.decode_stack: QuantizedDecodeStack | None = None
        self._decode_stack_built = False

    # NOTE: False for subclasses whose head is not an LM head (sequence classifiers).
    has_lm_head = True

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, backend: AttentionBackend) -> torch.Tensor:
        """Returns float32 logits of each request's last new token: [B, vocab]."""
        hidden = self.last_hidden(batch, backend)
        if self.lm_head is None:
            return F.linear(hidden, self._embedding_weight()).float()
        logits: torch.Tensor = self.lm_head(hidden)
        return logits.float()

    def pack_for_cpu(self, weight_dtype: torch.dtype = torch.float32) -> None:
        """Swaps every linear layer, the tied LM head included, for one on a packed weight
        kept in ``weight_dtype`` (float32, or bfloat16 for the bf16 kernels)."""
        pack_linear_layers(self, weight_dtype)
        if self.lm_head is None and self.has_lm_head:
            head = PackedLinear(self._embedding_weight().to(weight_dtype), None)
            self.lm_head = head
            if head.holds_fp32_panels:
                # NOTE: the embedding's table is dropped; its rows come from the head's panels.
                self.embed_tokens = PackedEmbedding(head)

    def _embedding_weight(self) -> torch.Tensor:
        """The tied head's weight (a GGUF model's tied head is its embedding's ``as_linear``)."""
        assert isinstance(self.embed_tokens, nn.Embedding), "a quantized embedding brings its own head"
        return self.embed_tokens.weight

    @torch.inference_mode()
    def last_hidden(self, batch: ForwardBatch, backend: AttentionBackend) -> torch.Tensor:
        """The final-normed hidden state of each request's last new token: [B, hidden]."""
        backend.init_forward_metadata(batch)
        hidden = self.embed_tokens(batch.input_ids)
        rope = self.rotary.lookup(batch.positions, hidden.dtype)
        residual: torch.Tensor | None = None
        stack = self._stack_for(batch, backend, hidden, rope)
        if stack is not None:
            hidden, residual = stack.decode(hidden, batch, rope)
        else:
            for layer in self.layers:
                hidden, residual = layer(hidden, residual, batch, backend, rope)
        assert residual is not None, "a model has at least one layer"
        last = batch.last_token_indices
        normed, _ = self.norm.add_and_norm(hidden[last], residual[last])
        return normed

    def _stack_for(
        self, batch: ForwardBatch, backend: AttentionBackend, hidden: torch.Tensor, rope: RopeAngles
    ) -> QuantizedDecodeStack | None:
        """The one-call decoder stack when it computes this step, else None (the Python layers)."""
        # NOTE: a model whose layers the stack cannot run (every safetensors model) learns it
        # at its first decode; later steps skip the per-step checks.
        if self._decode_stack_built and self.decode_stack is None:
            return None
        if not QuantizedDecodeStack.runs(batch, backend, hidden, rope):
            return None
        if not self._decode_stack_built:
            layers = [layer.stack_layer() if isinstance(layer, DecoderLayer) else None for layer in self.layers]
            self.decode_stack = QuantizedDecodeStack.build(self.config, layers, backend.scale)
            self._decode_stack_built = True
        return self.decode_stack

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copies checkpoint tensors (Hugging Face names) into our fused parameters."""
        params = dict(self.named_parameters())
        expected = {name: set(_slots(name, param)) for name, param in params.items()}
        # NOTE: a tied head (tensor parallelism's included) reads the embedding's rows.
        headless = self.lm_head is None or self.config.tie_word_embeddings
        for checkpoint_name, tensor in weights:
            name = checkpoint_name.removeprefix("model.")
            if "rotary_emb.inv_freq" in name or (headless and name == "lm_head.weight"):
                continue
            our_name, shard = _fuse(name)
            if our_name not in params:
                raise ValueError(
                    f"checkpoint tensor {checkpoint_name!r} has no place in {self.config.architecture}"
                )
            target = params[our_name] if shard is None else _shard_view(params[our_name], our_name, shard, self.config)
            if target.shape != tensor.shape:
                raise ValueError(
                    f"checkpoint tensor {checkpoint_name!r} has shape {tuple(tensor.shape)}, "
                    f"expected {tuple(target.shape)}"
                )
            with torch.no_grad():
                target.copy_(tensor)
            if shard is None:
                expected[our_name].clear()  # NOTE: a whole tensor fills every shard
            else:
                expected[our_name].discard(shard)
        missing = sorted(_checkpoint_name(name, shard) for name, shards in expected.items() for shard in shards)
        if missing:
            raise ValueError(f"checkpoint is missing {len(missing)} tensors, e.g. {missing[0]}")


def _slots(name: str, param: torch.Tensor) -> list[Shard]:
    if is_stacked_expert_param(name):
        return [*expert_shards(name, param)]
    if ".qkv_proj." in name:
        return [0, 1, 2]
    if ".gate_up_proj." in name:
        return [0, 1]
    return [None]


def _fuse(name: str) -> tuple[str, Shard]:
    expert = expert_target(name)
    if expert is not None:
        return expert
    for part, fused, shard in _FUSED_SHARDS:
        if f".{part}." in name:
            return name.replace(f".{part}.", f".{fused}."), shard
    return name, None


def _checkpoint_name(name: str, shard: Shard) -> str:
    """The Hugging Face name of our parameter ``name`` (part ``shard`` if fused)."""
    if isinstance(shard, tuple):
        return expert_checkpoint_name(name, shard)
    for part, fused, index in _FUSED_SHARDS:
        if f".{fused}." in name and index == shard:
            name = name.replace(f".{fused}.", f".{part}.")
            break
    return name if name.startswith("lm_head.") else f"model.{name}"


def _shard_view(param: torch.Tensor, name: str, shard: int | ExpertShard, config: ModelConfig) -> torch.Tensor:
    if isinstance(shard, tuple):
        return expert_shard_view(param, shard)
    if ".gate_up_proj." in name:
        # NOTE: from the parameter, not the config: a shared expert has its own width.
        size = param.shape[0] // 2
        return param.narrow(0, shard * size, size)
    q_size = config.num_heads * config.head_dim
    kv_size = config.num_kv_heads * config.head_dim
    starts = (0, q_size, q_size + kv_size)
    sizes = (q_size, kv_size, kv_size)
    return param.narrow(0, starts[shard], sizes[shard])
