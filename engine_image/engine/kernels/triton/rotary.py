"""Rotate-half rotary embedding of q and k in one launch, math in float32.

cos/sin are the rows the model already looked up for each token (``[T, head_dim]``, the
two halves equal, as ``RotaryEmbedding`` builds them); only the first half is read.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_heads(
    X, Out, token, stride_xt, stride_xh, stride_ot, stride_oh, cos, sin,
    NUM_HEADS: tl.constexpr,
    HALF: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_HALF)
    mask = (offs_h[:, None] < NUM_HEADS) & (offs_d[None, :] < HALF)
    src = X + token * stride_xt + offs_h[:, None] * stride_xh + offs_d[None, :]
    dst = Out + token * stride_ot + offs_h[:, None] * stride_oh + offs_d[None, :]
    x1 = tl.load(src, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=mask, other=0.0).to(tl.float32)
    tl.store(dst, (x1 * cos - x2 * sin).to(Out.dtype.element_ty), mask=mask)
    tl.store(dst + HALF, (x2 * cos + x1 * sin).to(Out.dtype.element_ty), mask=mask)


@triton.jit
def _rotary_kernel(
    Q, K, Q_out, K_out, Cos, Sin,
    stride_qt, stride_qh, stride_kt, stride_kh,
    stride_oqt, stride_oqh, stride_okt, stride_okh,
    stride_ct, stride_st,
    NUM_Q_HEADS: tl.constexpr,
    NUM_K_HEADS: tl.constexpr,
    HALF: tl.constexpr,
    BLOCK_QH: tl.constexpr,
    BLOCK_KH: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    token = tl.program_id(0)
    offs_d = tl.arange(0, BLOCK_HALF)
    d_mask = offs_d < HALF
    cos = tl.load(Cos + token * stride_ct + offs_d, mask=d_mask, other=0.0).to(tl.float32)[None, :]
    sin = tl.load(Sin + token * stride_st + offs_d, mask=d_mask, other=0.0).to(tl.float32)[None, :]
    _rotate_heads(Q, Q_out, token, stride_qt, stride_qh, stride_oqt, stride_oqh, cos, sin,
                  NUM_Q_HEADS, HALF, BLOCK_QH, BLOCK_HALF)
    _rotate_heads(K, K_out, token, stride_kt, stride_kh, stride_okt, stride_okh, cos, sin,
                  NUM_K_HEADS, HALF, BLOCK_KH, BLOCK_HALF)


def apply_rotary(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """q: ``[T, heads, D]``, k: ``[T, kv_heads, D]`` (views with a unit last stride are
    fine); cos, sin: ``[T, D]`` or ``[T, 1, D]``. Returns new contiguous q and k."""
    num_tokens, num_q_heads, head_dim = q.shape
    num_k_heads = k.shape[1]
    if q.stride(-1) != 1 or k.stride(-1) != 1:
        raise ValueError("q and k need a unit stride in the head dimension")
    cos = cos.reshape(num_tokens, head_dim)
    sin = sin.reshape(num_tokens, head_dim)
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    half = head_dim // 2
    _rotary_kernel[(num_tokens,)](
        q, k, q_out, k_out, cos, sin,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        cos.stride(0), sin.stride(0),
        NUM_Q_HEADS=num_q_heads,
        NUM_K_HEADS=num_k_heads,
        HALF=half,
        BLOCK_QH=triton.next_power_of_2(num_q_heads),
        BLOCK_KH=triton.next_power_of_2(num_k_heads),
        BLOCK_HALF=triton.next_power_of_2(half),
    )
    return q_out, k_out
