"""Rotary embedding of q and k fused with the write of k and v into the KV pool: one launch
per layer instead of the rotary kernel and the pool's two ``index_put``s.

Rotate-half RoPE with math in float32, over the leading ``rotary`` dims of each head (all of
them but under a partial_rotary_factor; the rest pass through). cos/sin are the rows the
model looked up for each token (``RopeAngles``: ``[T, rotary]``, the two halves equal, sin
with its first half negated), so every rope type (llama3, yarn, longrope, ...) is just
another cache. Rotated q goes to a new tensor; rotated k and v go to the pool rows at
``loc``, cast to the pool's dtype, or FP8 (e4m3) bytes of ``x / scale`` in an FP8 pool.
Every shape comes from the tensors and nothing syncs with the host, so a decode forward
that runs it can be captured in a CUDA graph.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.triton.fp8_encode import float32_to_e4m3


@triton.jit
def _rotated(
    X, token, stride_t, stride_h, cos, sin, offs_d, partner, rotating,
    NUM_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    """Token ``token``'s heads of ``X`` (``[BLOCK_H, BLOCK_D]``, float32), rotated; and their mask."""
    offs_h = tl.arange(0, BLOCK_H)
    mask = (offs_h[:, None] < NUM_HEADS) & (offs_d[None, :] < HEAD_DIM)
    row = X + token * stride_t + offs_h[:, None] * stride_h
    x = tl.load(row + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
    swapped = tl.load(row + partner[None, :], mask=mask & rotating[None, :], other=0.0).to(tl.float32)
    return tl.where(rotating[None, :], x * cos + swapped * sin, x), mask


@triton.jit
def _store_kv(
    Buffer, slot, stride_s, stride_h, x, mask, scale, offs_d,
    KV_FP8: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    """``x`` (float32 rows of one token) into the pool row ``slot``, in the pool's dtype."""
    offs_h = tl.arange(0, BLOCK_H)
    dst = Buffer + slot * stride_s + offs_h[:, None] * stride_h + offs_d[None, :]
    if KV_FP8:
        # NOTE: a correctly rounded division (``/`` is approximate on GPUs), as the host's.
        tl.store(dst, float32_to_e4m3(tl.math.div_rn(x, scale)).to(tl.uint8), mask=mask)
    else:
        tl.store(dst, x.to(Buffer.dtype.element_ty), mask=mask)


@triton.jit
def _rope_kv_write_kernel(
    Q, K, V, Q_out, Cos, Sin, Loc, K_Buffer, V_Buffer,
    k_scale, v_scale,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_ot, stride_oh, stride_ct, stride_st, stride_loc,
    stride_kbs, stride_kbh, stride_vbs, stride_vbh,
    NUM_Q_HEADS: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    ROTARY: tl.constexpr,
    KV_FP8: tl.constexpr,
    BLOCK_QH: tl.constexpr,
    BLOCK_KH: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0)
    offs_d = tl.arange(0, BLOCK_D)
    rotating = offs_d < ROTARY
    # NOTE: rotate-half pairs dim d with d + ROTARY/2 (first half) or d - ROTARY/2 (second).
    partner = tl.where(offs_d < ROTARY // 2, offs_d + ROTARY // 2, offs_d - ROTARY // 2)
    cos = tl.load(Cos + token * stride_ct + offs_d, mask=rotating, other=1.0).to(tl.float32)[None, :]
    sin = tl.load(Sin + token * stride_st + offs_d, mask=rotating, other=0.0).to(tl.float32)[None, :]

    q, q_mask = _rotated(Q, token, stride_qt, stride_qh, cos, sin, offs_d, partner, rotating,
                         NUM_Q_HEADS, HEAD_DIM, BLOCK_QH)
    offs_qh = tl.arange(0, BLOCK_QH)
    q_dst = Q_out + token * stride_ot + offs_qh[:, None] * stride_oh + offs_d[None, :]
    tl.store(q_dst, q.to(Q_out.dtype.element_ty), mask=q_mask)

    slot = tl.load(Loc + token * stride_loc)
    k, kv_mask = _rotated(K, token, stride_kt, stride_kh, cos, sin, offs_d, partner, rotating,
                          NUM_KV_HEADS, HEAD_DIM, BLOCK_KH)
    _store_kv(K_Buffer, slot, stride_kbs, stride_kbh, k, kv_mask, k_scale, offs_d, KV_FP8, BLOCK_KH)
    offs_kh = tl.arange(0, BLOCK_KH)
    v_src = V + token * stride_vt + offs_kh[:, None] * stride_vh + offs_d[None, :]
    v = tl.load(v_src, mask=kv_mask, other=0.0).to(tl.float32)
    _store_kv(V_Buffer, slot, stride_vbs, stride_vbh, v, kv_mask, v_scale, offs_d, KV_FP8, BLOCK_KH)


def rope_kv_write(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cos: torch.Tensor,
    sin_signed: torch.Tensor,
    loc: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    kv_scales: tuple[float, float] = (1.0, 1.0),
) -> torch.Tensor:
    """Rotates q and k, stores k and v in pool rows ``loc``; returns rotated q (contiguous).

    q: ``[T, heads, D]``; k, v: ``[T, kv_heads, D]`` (views with a unit last stride, e.g. of
    one fused projection, are fine); cos, sin_signed: ``[T, R]`` or ``[T, 1, R]`` with R the
    rotating dims (even, <= D); loc: ``[T]`` pool slots; k/v_buffer: ``[slots, kv_heads, D]``
    in any float dtype or float8_e4m3fn (then ``kv_scales``: what a stored k, v value is
    multiplied by).
    """
    num_tokens, num_q_heads, head_dim = q.shape
    num_kv_heads = k.shape[1]
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        raise ValueError("q, k and v need a unit stride in the head dimension")
    rotary = cos.shape[-1]
    if rotary % 2 or rotary > head_dim:
        raise ValueError(f"{rotary} rotating dims do not pair up within a head of {head_dim}")
    cos = cos.reshape(num_tokens, rotary)
    sin_signed = sin_signed.reshape(num_tokens, rotary)
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    # NOTE: an FP8 pool is written as its bytes, encoded in the kernel (fp8_encode.py).
    kv_fp8 = k_buffer.dtype == torch.float8_e4m3fn
    if kv_fp8:
        k_buffer, v_buffer = k_buffer.view(torch.uint8), v_buffer.view(torch.uint8)
    _rope_kv_write_kernel[(num_tokens,)](
        q, k, v, q_out, cos, sin_signed, loc, k_buffer, v_buffer,
        *kv_scales,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        q_out.stride(0), q_out.stride(1), cos.stride(0), sin_signed.stride(0), loc.stride(0),
        k_buffer.stride(0), k_buffer.stride(1), v_buffer.stride(0), v_buffer.stride(1),
        NUM_Q_HEADS=num_q_heads,
        NUM_KV_HEADS=num_kv_heads,
        HEAD_DIM=head_dim,
        ROTARY=rotary,
        KV_FP8=kv_fp8,
        BLOCK_QH=triton.next_power_of_2(num_q_heads),
        BLOCK_KH=triton.next_power_of_2(num_kv_heads),
        BLOCK_D=triton.next_power_of_2(head_dim),
    )
    return q_out
