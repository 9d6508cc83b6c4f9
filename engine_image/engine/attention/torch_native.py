"""Reference attention on any device: gathers each request's KV from the pool and runs SDPA."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.attention.base import AttentionBackend, register_attention_backend
from engine.runtime.forward_batch import ForwardBatch, ForwardMode


@dataclass(frozen=True)
class _DecodeMetadata:
    kv_indices: torch.Tensor  # [B, max_len] pool slots, padded with slot 0
    mask: torch.Tensor  # [B, 1, 1, max_len] additive: 0 for real keys, -inf for padding


@dataclass(frozen=True)
class _ExtendMetadata:
    kv_indices: list[torch.Tensor]  # per request, [seq_len] pool slots
    masks: list[torch.Tensor | None]  # per request, [new, seq_len] bool; None = plain causal
    token_offsets: list[int]  # start of each request in the flattened token axis


@register_attention_backend("torch_native")
class TorchNativeAttention(AttentionBackend):
    def init_forward_metadata(self, batch: ForwardBatch) -> None:
        if batch.mode is ForwardMode.DECODE:
            batch.attn_metadata = self._decode_metadata(batch)
        else:
            batch.attn_metadata = self._extend_metadata(batch)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int, batch: ForwardBatch
    ) -> torch.Tensor:
        batch.kv_pool.set_kv(layer_id, batch.out_cache_loc, k, v)
        k_buffer = batch.kv_pool.k_buffer(layer_id)
        v_buffer = batch.kv_pool.v_buffer(layer_id)
        if batch.mode is ForwardMode.DECODE:
            return self._decode(q, k_buffer, v_buffer, batch.attn_metadata)
        return self._extend(q, k_buffer, v_buffer, batch.attn_metadata, batch.extend_seq_lens_cpu)

    def _decode_metadata(self, batch: ForwardBatch) -> _DecodeMetadata:
        max_len = max(batch.seq_lens_cpu)
        rows = batch.req_to_token[batch.req_pool_indices, :max_len]
        arange = torch.arange(max_len, device=rows.device)
        valid = arange[None, :] < batch.seq_lens[:, None]
        kv_indices = torch.where(valid, rows, torch.zeros_like(rows))
        mask = torch.zeros(valid.shape, dtype=torch.float32, device=rows.device)
        mask.masked_fill_(~valid, float("-inf"))
        return _DecodeMetadata(kv_indices=kv_indices, mask=mask[:, None, None, :])

    def _extend_metadata(self, batch: ForwardBatch) -> _ExtendMetadata:
        kv_indices: list[torch.Tensor] = []
        masks: list[torch.Tensor | None] = []
        offsets: list[int] = []
        offset = 0
        pool_rows = batch.req_pool_indices.tolist()
        for row, seq_len, prefix, new in zip(
            pool_rows, batch.seq_lens_cpu, batch.extend_prefix_lens_cpu, batch.extend_seq_lens_cpu
        ):
            kv_indices.append(batch.req_to_token[row, :seq_len])
            if prefix == 0:
                masks.append(None)
            else:
                query_pos = torch.arange(prefix, seq_len, device=batch.input_ids.device)
                key_pos = torch.arange(seq_len, device=batch.input_ids.device)
                masks.append(key_pos[None, :] <= query_pos[:, None])
            offsets.append(offset)
            offset += new
        return _ExtendMetadata(kv_indices=kv_indices, masks=masks, token_offsets=offsets)

    def _decode(
        self, q: torch.Tensor, k_buffer: torch.Tensor, v_buffer: torch.Tensor, meta: _DecodeMetadata
    ) -> torch.Tensor:
        batch_size = q.shape[0]
        keys = k_buffer[meta.kv_indices].transpose(1, 2)  # [B, kv_heads, L, D]
        values = v_buffer[meta.kv_indices].transpose(1, 2)
        out = F.scaled_dot_product_attention(
            q.unsqueeze(2), keys, values, attn_mask=meta.mask.to(q.dtype), enable_gqa=True
        )
        return out.reshape(batch_size, self.num_heads * self.head_dim)

    def _extend(
        self,
        q: torch.Tensor,
        k_buffer: torch.Tensor,
        v_buffer: torch.Tensor,
        meta: _ExtendMetadata,
        new_lens: list[int],
    ) -> torch.Tensor:
        out = torch.empty(q.shape[0], self.num_heads * self.head_dim, dtype=q.dtype, device=q.device)
        for indices, mask, start, new in zip(meta.kv_indices, meta.masks, meta.token_offsets, new_lens):
            q_req = q[start : start + new].transpose(0, 1).unsqueeze(0)  # [1, H, new, D]
            keys = k_buffer[indices].transpose(0, 1).unsqueeze(0)  # [1, kv_heads, L, D]
            values = v_buffer[indices].transpose(0, 1).unsqueeze(0)
            attn = F.scaled_dot_product_attention(
                q_req, keys, values, attn_mask=mask, is_causal=mask is None, enable_gqa=True
            )
            out[start : start + new] = attn[0].transpose(0, 1).reshape(new, -1)
        return out
