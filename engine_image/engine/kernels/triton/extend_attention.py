"""Extend (prefill) attention: new tokens over a cached prefix, causal, page-size-1 KV pool.

The new tokens' K/V are already in the pool, so each request attends over
``req_to_token[row, :prefix + new]`` with query ``i`` (position ``prefix + i``) seeing keys
``0 .. prefix + i``. One program per (request, query head, block of new tokens) runs an
online softmax over key blocks up to the block's causal limit. A sliding window (``window > 0``)
hides keys more than ``window - 1`` positions behind a query; a logit cap maps each scaled
score s to ``cap * tanh(s / cap)``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.triton.dot import dot_precision
from engine.kernels.triton.fp8_decode import load_kv
from engine.kernels.triton.logit_cap import cap_logits


@triton.jit
def _extend_kernel(
    Q, O, K_Buffer, V_Buffer, Req_to_token, Req_pool_indices, Q_starts, Extend_lens, Prefix_lens,
    sm_scale, window, k_scale, v_scale,
    stride_qt, stride_qh,
    stride_ot, stride_oh,
    stride_kt, stride_kh,
    stride_vt, stride_vh,
    stride_rt,
    LOGIT_CAP: tl.constexpr,
    KV_FP8: tl.constexpr,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    b = tl.program_id(0)
    head = tl.program_id(1)
    block_m = tl.program_id(2)
    new_len = tl.load(Extend_lens + b).to(tl.int32)
    if block_m * BLOCK_M < new_len:
        q_start = tl.load(Q_starts + b)
        prefix = tl.load(Prefix_lens + b).to(tl.int32)
        row = tl.load(Req_pool_indices + b)
        kv_head = head // GROUP

        offs_m = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
        m_mask = offs_m < new_len
        offs_d = tl.arange(0, BLOCK_D)
        d_mask = offs_d < HEAD_DIM
        q = tl.load(
            Q + (q_start + offs_m)[:, None] * stride_qt + head * stride_qh + offs_d[None, :],
            mask=m_mask[:, None] & d_mask[None, :],
            other=0.0,
        )
        q_pos = prefix + offs_m
        # NOTE: the last query row of this block sees keys up to its own position.
        kv_end = prefix + tl.minimum((block_m + 1) * BLOCK_M, new_len)
        # NOTE: ... and the first row's window starts where this block's keys start
        # (branch-free, so compiled and interpreted agree; window 0: at key 0).
        kv_start = tl.where(window > 0, tl.maximum(prefix + block_m * BLOCK_M - window + 1, 0), 0)

        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        for n0 in range(kv_start, kv_end, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            n_mask = offs_n < kv_end
            slots = tl.load(Req_to_token + row * stride_rt + offs_n, mask=n_mask, other=0)
            kv_mask = n_mask[:, None] & d_mask[None, :]
            k = load_kv(
                K_Buffer + slots[:, None] * stride_kt + kv_head * stride_kh + offs_d[None, :],
                kv_mask, k_scale, q.dtype, KV_FP8,
            )
            scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * sm_scale
            if LOGIT_CAP > 0:
                scores = cap_logits(scores, LOGIT_CAP)
            in_window = (offs_n[None, :] > q_pos[:, None] - window) | (window <= 0)
            visible = (offs_n[None, :] <= q_pos[:, None]) & n_mask[None, :] & in_window
            scores = tl.where(visible, scores, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(scores, 1))
            # NOTE: under a window a row may see no key of a block (its max is -inf): it
            # subtracts 0 instead, so its p and alpha are 0, not exp(-inf + inf) = NaN.
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp(scores - m_safe[:, None])
            alpha = tl.exp(m_i - m_safe)
            v = load_kv(
                V_Buffer + slots[:, None] * stride_vt + kv_head * stride_vh + offs_d[None, :],
                kv_mask, v_scale, q.dtype, KV_FP8,
            )
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_new

        # NOTE: only padded rows (not stored) can end with l_i = 0.
        out = acc / tl.maximum(l_i, 1e-30)[:, None]
        tl.store(
            O + (q_start + offs_m)[:, None] * stride_ot + head * stride_oh + offs_d[None, :],
            out.to(O.dtype.element_ty),
            mask=m_mask[:, None] & d_mask[None, :],
        )


def extend_attention(
    q: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    q_starts: torch.Tensor,
    extend_lens: torch.Tensor,
    prefix_lens: torch.Tensor,
    max_extend_len: int,
    sm_scale: float,
    block_m: int = 32,
    block_n: int = 32,
    window: int = 0,
    logit_cap: float = 0.0,
    kv_scales: tuple[float, float] = (1.0, 1.0),
) -> torch.Tensor:
    """Causal attention of the new tokens of B requests, flattened along the token axis.

    q: ``[T, heads, head_dim]`` (request ``b``'s tokens at ``q_starts[b] ..
    q_starts[b] + extend_lens[b]``); the pool already holds every token's K/V at
    ``req_to_token[req_pool_indices[b], :prefix_lens[b] + extend_lens[b]]``.
    Returns ``[T, heads, head_dim]`` in q's dtype.
    """
    _, num_heads, head_dim = q.shape
    num_kv_heads = k_buffer.shape[1]
    if num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} query heads do not divide into {num_kv_heads} KV heads")
    q = q.contiguous()
    # NOTE: an FP8 pool goes in as its bytes, decoded in the kernel (fp8_decode.py).
    kv_fp8 = k_buffer.dtype == torch.float8_e4m3fn
    if kv_fp8:
        k_buffer, v_buffer = k_buffer.view(torch.uint8), v_buffer.view(torch.uint8)
    out = torch.empty_like(q)
    batch = req_pool_indices.shape[0]
    grid = (batch, num_heads, triton.cdiv(max_extend_len, block_m))
    _extend_kernel[grid](
        q, out, k_buffer, v_buffer, req_to_token, req_pool_indices, q_starts, extend_lens, prefix_lens,
        sm_scale, window, *kv_scales,
        q.stride(0), q.stride(1),
        out.stride(0), out.stride(1),
        k_buffer.stride(0), k_buffer.stride(1),
        v_buffer.stride(0), v_buffer.stride(1),
        req_to_token.stride(0),
        LOGIT_CAP=logit_cap,
        KV_FP8=kv_fp8,
        GROUP=num_heads // num_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=triton.next_power_of_2(head_dim),
        DOT_PRECISION=dot_precision(q.dtype),
    )
    return out
