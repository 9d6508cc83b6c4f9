"""Attention with Triton kernels over the page-size-1 KV pool; the default on CUDA.

Decode reads KV slots straight from ``req_to_token`` with fixed-shape launches, so a decode
forward through this backend can be captured in a CUDA graph. Given q and k before RoPE
(``forward_rope``), one kernel rotates them and writes K/V into the pool. A prefill without
cached prefixes attends over the forward's own K/V (prefill_no_prefix.py: FlashAttention's
varlen kernel on CUDA). Checked against the torch-native backend (the reference) in
tests/engine/kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.attention.base import (
    FULL_ATTENTION,
    AttentionBackend,
    LayerAttention,
    register_attention_backend,
)
from engine.attention.prefill_no_prefix import (
    FreshPrefill,
    fresh_prefill,
    fresh_prefill_attention,
    serves,
)
from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.kernels.triton.decode_attention import decode_attention, decode_num_splits
from engine.kernels.triton.extend_attention import extend_attention
from engine.kernels.triton.rope_kv_write import rope_kv_write
from engine.layers.rotary import RopeAngles


@dataclass(frozen=True)
class _ExtendMetadata:
    q_starts: torch.Tensor  # [B] start of each request in the flattened token axis
    extend_lens: torch.Tensor  # [B] new tokens per request
    prefix_lens: torch.Tensor  # [B] cached tokens per request
    max_extend_len: int
    # NOTE: set when no request has a cached prefix: its layers attend over the new tokens'
    # k/v alone (prefill_no_prefix.py) instead of through the extend kernel.
    fresh: FreshPrefill | None


@register_attention_backend("triton")
class TritonAttention(AttentionBackend):
    cuda_graph_safe = True
    fuses_rope = True
    # NOTE: streaming multiprocessors of the device decode runs on, read at the first decode
    # (the split count follows it, the batch size and the context: ``decode_num_splits``).
    sm_count: int | None = None

    def init_forward_metadata(self, batch: ForwardBatch) -> None:
        if batch.mode is ForwardMode.DECODE:
            # NOTE: decode needs nothing beyond the batch's own tensors; building nothing
            # here is what keeps a decode forward capturable in a CUDA graph.
            batch.attn_metadata = None
            return
        device = batch.input_ids.device
        new = batch.extend_seq_lens_cpu
        starts = [0]
        for n in new[:-1]:
            starts.append(starts[-1] + n)
        batch.attn_metadata = _ExtendMetadata(
            q_starts=torch.tensor(starts, dtype=torch.int64, device=device),
            extend_lens=torch.tensor(new, dtype=torch.int64, device=device),
            prefix_lens=torch.tensor(batch.extend_prefix_lens_cpu, dtype=torch.int64, device=device),
            max_extend_len=max(new),
            fresh=fresh_prefill(batch.extend_prefix_lens_cpu, new, device),
        )

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer_id: int,
        batch: ForwardBatch,
        layer: LayerAttention = FULL_ATTENTION,
    ) -> torch.Tensor:
        batch.kv_pool.set_kv(layer_id, batch.out_cache_loc, k, v)
        return self._attend(q, layer_id, batch, layer)

    def forward_rope(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        rope: RopeAngles,
        layer_id: int,
        batch: ForwardBatch,
        layer: LayerAttention = FULL_ATTENTION,
    ) -> torch.Tensor:
        pool = batch.kv_pool
        q = rope_kv_write(
            q, k, v, rope.cos, rope.sin_signed, batch.out_cache_loc,
            pool.k_buffer(layer_id), pool.v_buffer(layer_id), pool.scales[layer_id],
        )
        return self._attend(q, layer_id, batch, layer)

    def _attend(self, q: torch.Tensor, layer_id: int, batch: ForwardBatch, layer: LayerAttention) -> torch.Tensor:
        """q's attention over the pool, which holds this forward's new K/V already."""
        scale, window, cap = self.scale_of(layer), layer.sliding_window or 0, layer.logit_cap or 0.0
        k_buffer = batch.kv_pool.k_buffer(layer_id)
        v_buffer = batch.kv_pool.v_buffer(layer_id)
        if batch.mode is ForwardMode.DECODE:
            if self.sm_count is None:
                cuda = q.device.type == "cuda"
                self.sm_count = torch.cuda.get_device_properties(q.device).multi_processor_count if cuda else 1
            splits = decode_num_splits(batch.batch_size, k_buffer.shape[1], batch.req_to_token.shape[1], self.sm_count)
            out = decode_attention(
                q, k_buffer, v_buffer, batch.req_to_token, batch.req_pool_indices,
                batch.seq_lens, scale, num_splits=splits, window=window, logit_cap=cap,
                kv_scales=batch.kv_pool.scales[layer_id],
            )
        elif batch.attn_metadata.fresh is not None and serves(q, layer.logit_cap):
            # NOTE: this forward's own rows, read back from the pool as the extend kernel would
            # see them (rotated, and rounded in an FP8 pool): one gather of the new tokens'
            # slots, where the extend kernel gathers per key of every query block.
            pool, loc = batch.kv_pool, batch.out_cache_loc
            k, v = pool.read(layer_id, False, loc, q.dtype), pool.read(layer_id, True, loc, q.dtype)
            out = fresh_prefill_attention(q, k, v, batch.attn_metadata.fresh, scale, window)
        else:
            meta: _ExtendMetadata = batch.attn_metadata
            out = extend_attention(
                q, k_buffer, v_buffer, batch.req_to_token, batch.req_pool_indices,
                meta.q_starts, meta.extend_lens, meta.prefix_lens, meta.max_extend_len, scale,
                window=window, logit_cap=cap, kv_scales=batch.kv_pool.scales[layer_id],
            )
        return out.view(-1, self.num_heads * self.head_dim)
