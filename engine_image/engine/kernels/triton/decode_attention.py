"""Decode attention over a page-size-1 KV pool: split-KV partial softmax, then a reduce.

Stage 1 splits each request's keys into ``num_splits`` equal chunks and, per (request,
KV head, split), attends every query head of that KV head's group to its chunk, writing a
normalised partial output and its log-sum-exp. Stage 2 merges the splits per query head.
KV slots are read through ``req_to_token[req_pool_indices[b], :seq_lens[b]]``, so the
kernels need no per-forward index tensors and every shape depends only on the batch size
(which is what CUDA graph capture needs). A sliding window (``window > 0``) starts the keys
at ``seq_len - window``; a logit cap maps each scaled score s to ``cap * tanh(s / cap)``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.triton.dot import dot_precision
from engine.kernels.triton.fp8_decode import load_kv
from engine.kernels.triton.logit_cap import cap_logits

# NOTE: tl.dot needs at least 16 rows: a GQA group (often 1..8 heads) is padded up to it.
_MIN_DOT_ROWS = 16
# NOTE: a split reads at least this many keys of the longest context the batch may hold.
_MIN_SPLIT_KEYS = 128
_MAX_SPLITS = 16


def decode_num_splits(batch_size: int, num_kv_heads: int, max_context: int, sm_count: int) -> int:
    """The split count of a decode launch: enough (request, KV head, split) programs for two
    per SM, no more splits than ``max_context`` keys fill at ``_MIN_SPLIT_KEYS`` each, at
    most ``_MAX_SPLITS`` (the reduce reads every split).

    NOTE: ``max_context`` is the longest context the batch may hold (the request table's
    width), not the batch's current longest: a captured CUDA graph replays its split count
    for every context length, and a split past a request's keys costs one empty program.
    """
    fill_sms = -(-2 * sm_count // (batch_size * num_kv_heads))
    by_context = -(-max_context // _MIN_SPLIT_KEYS)
    return max(1, min(_MAX_SPLITS, fill_sms, by_context))


@triton.jit
def _decode_split_kernel(
    Q, K_Buffer, V_Buffer, Req_to_token, Req_pool_indices, Seq_lens, Mid_O, Mid_Lse,
    sm_scale, window, k_scale, v_scale,
    stride_qb, stride_qh,
    stride_kt, stride_kh,
    stride_vt, stride_vh,
    stride_rt,
    stride_mob, stride_moh, stride_mos,
    stride_mlb, stride_mlh,
    LOGIT_CAP: tl.constexpr,
    KV_FP8: tl.constexpr,
    GROUP: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)

    offs_h = tl.arange(0, BLOCK_H)
    h_mask = offs_h < GROUP
    heads = kv_head * GROUP + offs_h
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM

    seq_len = tl.load(Seq_lens + b).to(tl.int32)
    row = tl.load(Req_pool_indices + b)
    # NOTE: branch-free (window 0: the whole sequence), so compiled and interpreted agree.
    first = tl.maximum(seq_len - tl.where(window > 0, window, seq_len), 0)
    split_len = tl.cdiv(seq_len - first, NUM_SPLITS)
    start = first + split * split_len
    end = tl.minimum(start + split_len, seq_len)

    q = tl.load(
        Q + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
        mask=h_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_mask = offs_n < end
        slots = tl.load(Req_to_token + row * stride_rt + offs_n, mask=n_mask, other=0)
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = load_kv(
            K_Buffer + slots[:, None] * stride_kt + kv_head * stride_kh + offs_d[None, :],
            kv_mask, k_scale, q.dtype, KV_FP8,
        )
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * sm_scale
        if LOGIT_CAP > 0:
            scores = cap_logits(scores, LOGIT_CAP)
        scores = tl.where(n_mask[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        p = tl.exp(scores - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        v = load_kv(
            V_Buffer + slots[:, None] * stride_vt + kv_head * stride_vh + offs_d[None, :],
            kv_mask, v_scale, q.dtype, KV_FP8,
        )
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new

    # NOTE: an empty split (seq_len < num_splits) leaves l_i = 0 and m_i = -inf: it stores
    # a zero output and lse = -inf, which gives it zero weight in the reduce. A non-empty
    # split has l_i >= 1 (its max term is exp(0)), so the clamp changes nothing there.
    l_i = tl.maximum(l_i, 1e-30)
    out = acc / l_i[:, None]
    lse = m_i + tl.log(l_i)
    tl.store(
        Mid_O + b * stride_mob + heads[:, None] * stride_moh + split * stride_mos + offs_d[None, :],
        out,
        mask=h_mask[:, None] & d_mask[None, :],
    )
    tl.store(Mid_Lse + b * stride_mlb + heads * stride_mlh + split, lse, mask=h_mask)


@triton.jit
def _decode_reduce_kernel(
    Mid_O, Mid_Lse, O,
    stride_mob, stride_moh, stride_mos,
    stride_mlb, stride_mlh,
    stride_ob, stride_oh,
    NUM_SPLITS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0)
    head = tl.program_id(1)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM

    # NOTE: split 0 is never empty (seq_len >= 1, window >= 1), so m_i is finite after the first step
    # and the -inf of later empty splits only ever appears as exp(-inf) = 0.
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for split in range(NUM_SPLITS):
        lse = tl.load(Mid_Lse + b * stride_mlb + head * stride_mlh + split)
        part = tl.load(
            Mid_O + b * stride_mob + head * stride_moh + split * stride_mos + offs_d,
            mask=d_mask,
            other=0.0,
        )
        m_new = tl.maximum(m_i, lse)
        alpha = tl.exp(m_i - m_new)
        weight = tl.exp(lse - m_new)
        acc = acc * alpha + weight * part
        l_i = l_i * alpha + weight
        m_i = m_new
    tl.store(
        O + b * stride_ob + head * stride_oh + offs_d,
        (acc / l_i).to(O.dtype.element_ty),
        mask=d_mask,
    )


def decode_attention(
    q: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
    num_splits: int = 8,
    block_n: int = 32,
    window: int = 0,
    logit_cap: float = 0.0,
    kv_scales: tuple[float, float] = (1.0, 1.0),
) -> torch.Tensor:
    """One query token per request over its KV (its last ``window`` keys when ``window > 0``).

    q: ``[B, heads, head_dim]``; k/v_buffer: ``[slots, kv_heads, head_dim]``;
    req_to_token: ``[rows, max_len]``; req_pool_indices, seq_lens: ``[B]`` (every
    seq_len >= 1). Returns ``[B, heads, head_dim]`` in q's dtype.
    """
    batch, num_heads, head_dim = q.shape
    num_kv_heads = k_buffer.shape[1]
    if num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} query heads do not divide into {num_kv_heads} KV heads")
    group = num_heads // num_kv_heads
    q = q.contiguous()
    # NOTE: an FP8 pool goes in as its bytes, decoded in the kernel (fp8_decode.py).
    kv_fp8 = k_buffer.dtype == torch.float8_e4m3fn
    if kv_fp8:
        k_buffer, v_buffer = k_buffer.view(torch.uint8), v_buffer.view(torch.uint8)
    mid_o = torch.empty(batch, num_heads, num_splits, head_dim, dtype=torch.float32, device=q.device)
    mid_lse = torch.empty(batch, num_heads, num_splits, dtype=torch.float32, device=q.device)
    block_d = triton.next_power_of_2(head_dim)
    _decode_split_kernel[(batch, num_kv_heads, num_splits)](
        q, k_buffer, v_buffer, req_to_token, req_pool_indices, seq_lens, mid_o, mid_lse,
        sm_scale, window, *kv_scales,
        q.stride(0), q.stride(1),
        k_buffer.stride(0), k_buffer.stride(1),
        v_buffer.stride(0), v_buffer.stride(1),
        req_to_token.stride(0),
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        mid_lse.stride(0), mid_lse.stride(1),
        LOGIT_CAP=logit_cap,
        KV_FP8=kv_fp8,
        GROUP=group,
        NUM_SPLITS=num_splits,
        HEAD_DIM=head_dim,
        BLOCK_H=max(_MIN_DOT_ROWS, triton.next_power_of_2(group)),
        BLOCK_N=block_n,
        BLOCK_D=block_d,
        DOT_PRECISION=dot_precision(q.dtype),
    )
    out = torch.empty_like(q)
    _decode_reduce_kernel[(batch, num_heads)](
        mid_o, mid_lse, out,
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        mid_lse.stride(0), mid_lse.stride(1),
        out.stride(0), out.stride(1),
        NUM_SPLITS=num_splits,
        HEAD_DIM=head_dim,
        BLOCK_D=block_d,
    )
    return out
