"""One attention layer timed (triton.testing.do_bench, median ms) at a model's head shape: our
Triton kernels over the paged KV pool (shuffled slots) against SDPA on dense, contiguous K/V
(its best case) and against the torch-native backend (gather + SDPA). CUDA only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from bench.gpu_models import Shape
from bench.gpu_prefill import prefill_rows

# NOTE: (batch, context) of the decode rows and (batch, cached prefix, new tokens) of the
# extend rows.
DECODE_ROWS = ((1, 4096), (32, 1024), (128, 1024))
EXTEND_ROWS = ((1, 0, 4096), (8, 512, 512))


def _paged_kv(
    batch: int, length: int, kv_heads: int, head_dim: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A bf16 pool holding B sequences of ``length`` tokens at shuffled slots; returns
    (k_buffer, v_buffer, req_to_token, dense k [B, kv_heads, L, D], dense v)."""
    slots = torch.randperm(batch * length, device=device) + 1
    req_to_token = slots.view(batch, length)
    shape = (batch * length + 1, kv_heads, head_dim)
    k_buffer = torch.randn(shape, dtype=torch.bfloat16, device=device)
    v_buffer = torch.randn(shape, dtype=torch.bfloat16, device=device)
    dense_k = k_buffer[req_to_token].transpose(1, 2).contiguous()
    dense_v = v_buffer[req_to_token].transpose(1, 2).contiguous()
    return k_buffer, v_buffer, req_to_token, dense_k, dense_v


def _decode_row(shape: Shape, batch: int, length: int, device: torch.device) -> dict[str, Any]:
    from engine.kernels.triton.decode_attention import decode_attention

    heads, kv_heads, head_dim = shape.attention_heads
    k_buf, v_buf, r2t, dense_k, dense_v = _paged_kv(batch, length, kv_heads, head_dim, device)
    q = torch.randn(batch, heads, head_dim, dtype=torch.bfloat16, device=device)
    pool_rows = torch.arange(batch, device=device)
    seq_lens = torch.full((batch,), length, device=device)
    scale = head_dim**-0.5

    def ours() -> torch.Tensor:
        return decode_attention(q, k_buf, v_buf, r2t, pool_rows, seq_lens, scale)

    def sdpa(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q.unsqueeze(2), keys, values, enable_gqa=True)

    paged = (k_buf, v_buf, r2t, dense_k, dense_v)
    return _timed_row(shape, "decode", f"B={batch} L={length}", ours, sdpa, paged)


def _extend_row(shape: Shape, batch: int, prefix: int, new: int, device: torch.device) -> dict[str, Any]:
    from engine.kernels.triton.extend_attention import extend_attention

    heads, kv_heads, head_dim = shape.attention_heads
    length = prefix + new
    k_buf, v_buf, r2t, dense_k, dense_v = _paged_kv(batch, length, kv_heads, head_dim, device)
    q = torch.randn(batch * new, heads, head_dim, dtype=torch.bfloat16, device=device)
    dense_q = q.view(batch, new, heads, head_dim).transpose(1, 2)
    pool_rows = torch.arange(batch, device=device)
    q_starts = torch.arange(batch, device=device) * new
    new_lens = torch.full((batch,), new, device=device)
    prefix_lens = torch.full((batch,), prefix, device=device)
    # NOTE: bottom-right causal: query i (position prefix + i) sees keys 0 .. prefix + i.
    mask = torch.ones(new, length, dtype=torch.bool, device=device).tril(diagonal=prefix)
    scale = head_dim**-0.5

    def ours() -> torch.Tensor:
        return extend_attention(q, k_buf, v_buf, r2t, pool_rows, q_starts, new_lens, prefix_lens, new, scale)

    def sdpa(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        if prefix == 0:
            return F.scaled_dot_product_attention(dense_q, keys, values, is_causal=True, enable_gqa=True)
        return F.scaled_dot_product_attention(dense_q, keys, values, attn_mask=mask, enable_gqa=True)

    paged = (k_buf, v_buf, r2t, dense_k, dense_v)
    return _timed_row(shape, "extend", f"B={batch} prefix={prefix} new={new}", ours, sdpa, paged)


def _timed_row(
    shape: Shape,
    kernel: str,
    label: str,
    ours: Callable[[], torch.Tensor],
    sdpa: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    paged: tuple[torch.Tensor, ...],
) -> dict[str, Any]:
    """Median ms of our kernel, of SDPA on dense K/V, and of SDPA on K/V gathered from the
    pool (``paged``: the pool's K and V, the request table, the dense K and V)."""
    from triton.testing import do_bench

    k_buf, v_buf, r2t, dense_k, dense_v = paged
    return {
        "model": shape.key,
        "kernel": kernel,
        "shape": label,
        "triton_ms": do_bench(ours),
        "sdpa_dense_ms": do_bench(lambda: sdpa(dense_k, dense_v)),
        "gather_sdpa_ms": do_bench(lambda: sdpa(k_buf[r2t].transpose(1, 2), v_buf[r2t].transpose(1, 2))),
    }


def attention_rows(shape: Shape, device: torch.device) -> list[dict[str, Any]]:
    """Median ms of one layer's attention at ``shape``'s head shape: our Triton kernels, SDPA
    on dense K/V, and the torch-native backend's gather + SDPA."""
    decode = [_decode_row(shape, b, n, device) for b, n in DECODE_ROWS]
    extend = [_extend_row(shape, b, p, n, device) for b, p, n in EXTEND_ROWS]
    return decode + extend


def no_prefix_prefill_rows(device: torch.device) -> list[dict[str, Any]]:
    """The no-prefix prefill path's own rows (issue 28: a 4k prompt at >= SDPA's speed),
    reported as they come (their own columns)."""
    return prefill_rows(device)
