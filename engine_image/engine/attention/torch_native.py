"""Reference attention on any device: gathers each request's KV from the pool and runs SDPA
(or, under a logit cap, which SDPA cannot apply, the same softmax written out)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from engine.attention.base import (
    FULL_ATTENTION,
    AttentionBackend,
    LayerAttention,
    register_attention_backend,
)
from engine.core.forward_batch import ForwardBatch, ForwardMode, KVCache


@dataclass(frozen=True)
class _DecodeMetadata:
    kv_indices: torch.Tensor  # [B * max_len] pool slots, row-major, padded with slot 0
    max_len: int
    seq_lens: torch.Tensor  # [B]
    # NOTE: [B, 1, 1, max_len] bool per sliding window (None: none), built by the first layer
    # that asks: True for the keys each request's query sees.
    masks: dict[int | None, torch.Tensor] = field(default_factory=dict)

    def mask(self, window: int | None) -> torch.Tensor:
        if window not in self.masks:
            key_pos = torch.arange(self.max_len, device=self.seq_lens.device)[None, :]
            visible = key_pos < self.seq_lens[:, None]
            if window is not None:
                visible &= key_pos >= self.seq_lens[:, None] - window
            self.masks[window] = visible[:, None, None, :]
        return self.masks[window]


@dataclass(frozen=True)
class _ExtendSegment:
    """Consecutive requests of a prefill batch that one SDPA call serves.

    Either ``count`` requests of ``new_len`` tokens each with no cached prefix (their keys
    are the batch's own), or one request over a cached prefix of ``prefix`` tokens (its keys
    gathered from the pool at ``kv_indices``).
    """

    start: int  # first token in the flattened token axis
    count: int
    new_len: int
    prefix: int = 0
    kv_indices: torch.Tensor | None = None  # [prefix + new_len] pool slots

    def mask(self, window: int | None, device: torch.device) -> torch.Tensor | None:
        """[new_len, prefix + new_len] bool, True where a query sees a key; None: plain causal."""
        if self.prefix == 0 and window is None:
            return None
        query_pos = torch.arange(self.prefix, self.prefix + self.new_len, device=device)[:, None]
        key_pos = torch.arange(self.prefix + self.new_len, device=device)[None, :]
        visible = key_pos <= query_pos
        if window is not None:
            visible &= key_pos > query_pos - window
        return visible


@register_attention_backend("torch_native")
class TorchNativeAttention(AttentionBackend):
    def init_forward_metadata(self, batch: ForwardBatch) -> None:
        if batch.mode is ForwardMode.DECODE:
            batch.attn_metadata = self._decode_metadata(batch)
        else:
            batch.attn_metadata = self._extend_metadata(batch)

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
        if batch.mode is ForwardMode.DECODE:
            return self._decode(q, batch.kv_pool, layer_id, batch.attn_metadata, layer)
        return self._extend(q, k, v, batch.kv_pool, layer_id, batch.attn_metadata, layer)

    def _decode_metadata(self, batch: ForwardBatch) -> _DecodeMetadata:
        max_len = max(batch.seq_lens_cpu)
        rows = batch.req_to_token[batch.req_pool_indices, :max_len]
        arange = torch.arange(max_len, device=rows.device)
        valid = arange[None, :] < batch.seq_lens[:, None]
        kv_indices = torch.where(valid, rows, torch.zeros_like(rows))
        return _DecodeMetadata(kv_indices=kv_indices.flatten(), max_len=max_len, seq_lens=batch.seq_lens)

    def _extend_metadata(self, batch: ForwardBatch) -> list[_ExtendSegment]:
        segments: list[_ExtendSegment] = []
        offset = 0
        pool_rows = batch.req_pool_indices.tolist()
        for row, seq_len, prefix, new in zip(
            pool_rows, batch.seq_lens_cpu, batch.extend_prefix_lens_cpu, batch.extend_seq_lens_cpu
        ):
            last = segments[-1] if segments else None
            if prefix == 0 and last is not None and last.kv_indices is None and last.new_len == new:
                # NOTE: fresh prompts of equal length side by side share one batched SDPA call.
                segments[-1] = _ExtendSegment(last.start, last.count + 1, new)
            elif prefix == 0:
                segments.append(_ExtendSegment(offset, 1, new))
            else:
                segments.append(_ExtendSegment(offset, 1, new, prefix, batch.req_to_token[row, :seq_len]))
            offset += new
        return segments

    def _decode(
        self,
        q: torch.Tensor,
        pool: KVCache,
        layer_id: int,
        meta: _DecodeMetadata,
        layer: LayerAttention,
    ) -> torch.Tensor:
        batch_size = q.shape[0]
        # NOTE: index_select on the flattened slots, not advanced indexing: the same gather,
        # several times faster on CPU, where it is most of the decode attention's time.
        shape = (batch_size, meta.max_len, self.num_kv_heads, self.head_dim)
        keys = pool.read(layer_id, False, meta.kv_indices, q.dtype).view(shape).transpose(1, 2)  # [B, kv_heads, L, D]
        values = pool.read(layer_id, True, meta.kv_indices, q.dtype).view(shape).transpose(1, 2)
        # NOTE: the query heads sharing a KV head become that head's query rows (GQA folded
        # into the query length): one attention per KV head instead of broadcast K/V.
        group = self.num_heads // self.num_kv_heads
        queries = q.reshape(batch_size, self.num_kv_heads, group, self.head_dim)
        out = self._attend(queries, keys, values, meta.mask(layer.sliding_window), layer)
        return out.reshape(batch_size, self.num_heads * self.head_dim)

    def _extend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        pool: KVCache,
        layer_id: int,
        segments: list[_ExtendSegment],
        layer: LayerAttention,
    ) -> torch.Tensor:
        out = torch.empty(q.shape[0], self.num_heads * self.head_dim, dtype=q.dtype, device=q.device)
        for seg in segments:
            end = seg.start + seg.count * seg.new_len
            # [count, heads, new_len, D]
            queries = q[seg.start : end].reshape(seg.count, seg.new_len, self.num_heads, self.head_dim).transpose(1, 2)
            if seg.kv_indices is None:
                # NOTE: no cached prefix: the keys are this batch's own, no gather from the pool
                # (cast as the pool stores them, so both paths see the same values).
                keys = pool.as_stored(layer_id, False, k[seg.start : end])
                values = pool.as_stored(layer_id, True, v[seg.start : end])
            else:
                keys = pool.read(layer_id, False, seg.kv_indices, q.dtype)
                values = pool.read(layer_id, True, seg.kv_indices, q.dtype)
            shape = (seg.count, -1, self.num_kv_heads, self.head_dim)
            attn = self._attend(
                queries,
                keys.reshape(shape).transpose(1, 2),
                values.reshape(shape).transpose(1, 2),
                seg.mask(layer.sliding_window, q.device),
                layer,
            )
            out[seg.start : end] = attn.transpose(1, 2).reshape(end - seg.start, -1)
        return out

    def _attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, layer: LayerAttention
    ) -> torch.Tensor:
        """softmax(q·k * scale) v per head; ``mask`` True where a query sees a key, None: causal."""
        scale = self.scale_of(layer)
        if layer.logit_cap is None:
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
            )
        # NOTE: the order of transformers' eager attention (scale, cap, mask, float32 softmax).
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale
        scores = torch.tanh(scores / layer.logit_cap) * layer.logit_cap
        if mask is None:
            mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype), v)
