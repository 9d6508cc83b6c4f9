"""The CPU default: attention by a C++ kernel that reads the KV pool in place.

Decode runs one query per request; prefill runs the same kernel with one query per new token,
each over its request's keys up to and including its own (causal, cached prefix or not), the
last ``sliding_window`` of them on a windowed layer.
Anything the kernel does not cover (another dtype or head size, a machine where it cannot be
built) runs the torch-native reference this backend extends.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.attention.base import FULL_ATTENTION, LayerAttention, register_attention_backend
from engine.attention.torch_native import TorchNativeAttention
from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.kernels.cpu import CPU_HEAD_DIMS, load_cpu_kernels
from engine.memory.kv_pool import CPU_KERNEL_KV_DTYPES


@dataclass(frozen=True)
class _PoolDecode:
    """Decode metadata of the kernel: none beyond the batch itself, which it reads directly
    (``req_to_token`` rows of ``req_pool_indices``, ``seq_lens`` keys each)."""


@dataclass(frozen=True)
class _PoolExtend:
    """Prefill as the kernel takes it: per new token, its request's ``req_to_token`` row and
    the keys it sees (its position + 1)."""

    token_rows: torch.Tensor  # [T] int64
    token_lens: torch.Tensor  # [T] int64


@register_attention_backend("cpu")
class CpuAttention(TorchNativeAttention):
    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int) -> None:
        super().__init__(num_heads, num_kv_heads, head_dim)
        self._kernels = load_cpu_kernels() if head_dim in CPU_HEAD_DIMS else None

    def init_forward_metadata(self, batch: ForwardBatch) -> None:
        if batch.mode is ForwardMode.DECODE and self.decodes_with_kernel(batch):
            batch.attn_metadata = _PoolDecode()
        elif batch.mode is ForwardMode.EXTEND and self.decodes_with_kernel(batch):
            batch.attn_metadata = self._extend_in_pool(batch)
        else:
            super().init_forward_metadata(batch)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer_id: int,
        batch: ForwardBatch,
        layer: LayerAttention = FULL_ATTENTION,
    ) -> torch.Tensor:
        meta = batch.attn_metadata
        if not isinstance(meta, _PoolDecode | _PoolExtend):
            return super().forward(q, k, v, layer_id, batch, layer)
        assert self._kernels is not None
        pool = batch.kv_pool
        pool.set_kv(layer_id, batch.out_cache_loc, k, v)
        queries = q.reshape(q.shape[0], -1).contiguous()
        out = torch.empty_like(queries)
        rows, lens = (batch.req_pool_indices, batch.seq_lens) if isinstance(meta, _PoolDecode) else (
            meta.token_rows, meta.token_lens
        )
        self._kernels.decode_attention(
            queries, out, pool.k_buffer(layer_id), pool.v_buffer(layer_id), batch.req_to_token, rows, lens,
            self.scale_of(layer), layer.sliding_window or 0, layer.logit_cap or 0.0,
        )
        return out

    @staticmethod
    def _extend_in_pool(batch: ForwardBatch) -> _PoolExtend:
        new = torch.tensor(batch.extend_seq_lens_cpu, dtype=torch.int64)
        prefix = torch.tensor(batch.extend_prefix_lens_cpu, dtype=torch.int64)
        starts = torch.cumsum(new, 0) - new
        # NOTE: token i of request r sees prefix_r + (i - start_r) + 1 keys.
        token_lens = torch.arange(int(new.sum()), dtype=torch.int64) - starts.repeat_interleave(new)
        token_lens += prefix.repeat_interleave(new) + 1
        token_rows = batch.req_pool_indices.cpu().repeat_interleave(new)
        return _PoolExtend(token_rows=token_rows, token_lens=token_lens)

    def decodes_in_pool(self, batch: ForwardBatch) -> bool:
        """Whether this step's attention is the kernel's decode (set up by ``init_forward_metadata``)."""
        return isinstance(batch.attn_metadata, _PoolDecode)

    def decodes_with_kernel(self, batch: ForwardBatch) -> bool:
        """Whether a decode of ``batch`` runs the kernel: it is built and fits the head size,
        and the pool is float32 or bfloat16 on the CPU."""
        pool = batch.kv_pool
        return self._kernels is not None and pool.device.type == "cpu" and pool.dtype in CPU_KERNEL_KV_DTYPES
