"""The decode step of a GGUF model's decoder layers in one C++ call (``decode_stack.cpp``).

At one request a layer's multiplications take tens of microseconds, and the ~15 Python-level
calls around them (modules, views, kernel dispatch) as long again: the stack runs the same
kernels in the same order in C++, bit-identical to ``DecoderLayer.forward``, for decode steps
on CPU whose projections are all packed quantized weights and whose attention is the pool
kernel's. Everything else (prefill, MoE, q/k norms, other backends) runs the Python layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from engine.attention.base import AttentionBackend
from engine.attention.cpu_backend import CpuAttention
from engine.config.attention_pattern import AttentionPattern
from engine.config.model_config import ModelConfig
from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.kernels.cpu import load_cpu_kernels
from engine.layers.quantized_linear import QuantizedLinear
from engine.layers.rotary import RopeAngles


@dataclass(frozen=True)
class StackLayer:
    """A decoder layer as the stack takes it: its projections (fused q/k/v, o, fused
    gate/up, down) and the weights of its two norms."""

    projections: tuple[QuantizedLinear, QuantizedLinear, QuantizedLinear, QuantizedLinear]
    input_norm: torch.Tensor
    post_attention_norm: torch.Tensor

    def runs_in_stack(self) -> bool:
        """Every projection on packed panels, the norms float32 on the CPU."""
        norms = (self.input_norm, self.post_attention_norm)
        return all(p.packed_parts for p in self.projections) and all(
            w.dtype == torch.float32 and w.device.type == "cpu" for w in norms
        )


class QuantizedDecodeStack:
    def __init__(self, stack: Any, num_layers: int) -> None:
        self._stack = stack
        self._num_layers = num_layers
        self._pool: object | None = None
        self._k_buffers: list[torch.Tensor] = []
        self._v_buffers: list[torch.Tensor] = []

    @classmethod
    def build(
        cls, config: ModelConfig, layers: Sequence[StackLayer | None], scale: float
    ) -> QuantizedDecodeStack | None:
        """The stack over ``layers``, or None when some layer is not one it runs (None here)."""
        if load_cpu_kernels() is None or config.qk_norm or config.moe is not None or config.hidden_act != "silu":
            return None
        # NOTE: the stack's attention has no windows, caps or scales, its rotary no partial heads.
        if config.attention != AttentionPattern((None,) * config.num_layers) or config.rope.partial_rotary_factor != 1:
            return None
        complete = [layer for layer in layers if layer is not None and layer.runs_in_stack()]
        if len(complete) != len(layers):
            return None
        stack = torch.classes.gomgr_cpu.QuantizedDecodeStack(
            config.num_heads, config.num_kv_heads, config.head_dim, config.rms_norm_eps, scale
        )
        for layer in complete:
            for projection in layer.projections:
                panels, formats = zip(*projection.packed_parts, strict=True)
                stack.add_linear(
                    list(panels), [int(f) for f in formats], projection.part_out_features,
                    projection.bias, int(projection.isa),
                )
            stack.add_layer(layer.input_norm.detach(), layer.post_attention_norm.detach())
        return cls(stack, len(complete))

    @staticmethod
    def runs(batch: ForwardBatch, backend: AttentionBackend, hidden: torch.Tensor, rope: RopeAngles) -> bool:
        """Whether this step is one the stack computes: a decode in the pool kernel, in float32."""
        return (
            batch.mode is ForwardMode.DECODE
            and isinstance(backend, CpuAttention)
            and backend.decodes_in_pool(batch)
            and hidden.dtype == torch.float32
            and hidden.is_contiguous()
            and rope.cos.dtype == torch.float32
            and batch.out_cache_loc.dtype == torch.int64
        )

    def decode(self, hidden: torch.Tensor, batch: ForwardBatch, rope: RopeAngles) -> tuple[torch.Tensor, torch.Tensor]:
        """(The last layer's MLP output, the residual stream before it), as the layers return."""
        pool = batch.kv_pool
        if pool is not self._pool:
            self._k_buffers = [pool.k_buffer(i) for i in range(self._num_layers)]
            self._v_buffers = [pool.v_buffer(i) for i in range(self._num_layers)]
            self._pool = pool
        out: tuple[torch.Tensor, torch.Tensor] = self._stack.decode(
            hidden, rope.cos, rope.sin_signed, batch.out_cache_loc.contiguous(), self._k_buffers, self._v_buffers,
            batch.req_to_token, batch.req_pool_indices, batch.seq_lens,
        )
        return out
