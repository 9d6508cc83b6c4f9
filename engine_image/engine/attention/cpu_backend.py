"""The CPU default: decode attention by a C++ kernel that reads the KV pool in place.

Prefill and anything the kernel does not cover (another dtype or head size, a machine where
it cannot be built) run the torch-native reference this backend extends.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.attention.base import register_attention_backend
from engine.attention.torch_native import TorchNativeAttention
from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.kernels.cpu import CPU_HEAD_DIMS, load_cpu_kernels


@dataclass(frozen=True)
class _PoolDecode:
    """Decode metadata of the kernel: none beyond the batch itself, which it reads directly
    (``req_to_token`` rows of ``req_pool_indices``, ``seq_lens`` keys each)."""


@register_attention_backend("cpu")
class CpuAttention(TorchNativeAttention):
    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int) -> None:
        super().__init__(num_heads, num_kv_heads, head_dim)
        self._kernels = load_cpu_kernels() if head_dim in CPU_HEAD_DIMS else None

    def init_forward_metadata(self, batch: ForwardBatch) -> None:
        if batch.mode is ForwardMode.DECODE and self.decodes_with_kernel(batch):
            batch.attn_metadata = _PoolDecode()
        else:
            super().init_forward_metadata(batch)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int, batch: ForwardBatch
    ) -> torch.Tensor:
        if not isinstance(batch.attn_metadata, _PoolDecode):
            return super().forward(q, k, v, layer_id, batch)
        assert self._kernels is not None
        pool = batch.kv_pool
        pool.set_kv(layer_id, batch.out_cache_loc, k, v)
        queries = q.reshape(q.shape[0], -1).contiguous()
        out = torch.empty_like(queries)
        self._kernels.decode_attention(
            queries, out, pool.k_buffer(layer_id), pool.v_buffer(layer_id),
            batch.req_to_token, batch.req_pool_indices, batch.seq_lens, self.scale,
        )
        return out

    def decodes_in_pool(self, batch: ForwardBatch) -> bool:
        """Whether this step's attention is the kernel's decode (set up by ``init_forward_metadata``)."""
        return isinstance(batch.attn_metadata, _PoolDecode)

    def decodes_with_kernel(self, batch: ForwardBatch) -> bool:
        """Whether a decode of ``batch`` runs the kernel: it is built and fits the head size,
        and the pool is float32 on the CPU."""
        pool = batch.kv_pool
        return self._kernels is not None and pool.device.type == "cpu" and pool.dtype == torch.float32
