"""``y = x @ W^T`` with ``W`` an AWQ (GEMM layout) or GPTQ (v1) int4 weight, dequantized in the
kernel tile by tile (``engine.layers.int4_weight`` describes the layouts; this module takes
their tensors, as kernels know tensors only).

Each program computes a ``BLOCK_M x BLOCK_N`` tile of ``y``; per ``BLOCK_K`` step it loads the
packed words of the weight tile, the group of each input row (``g_idx``: act-order's groups or
``k // group_size``), that group's scales and zeros, and multiplies ``(q - zero) * scale`` in
float32, or in ``x``'s half dtype on tensor cores, accumulating in float32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.triton.dot import dot_precision

BLOCK_M = 16
BLOCK_N = 64
BLOCK_K = 32


@triton.jit
def _int4_matmul_kernel(
    x_ptr,
    qweight_ptr,
    qzeros_ptr,
    scales_ptr,
    g_idx_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_om,
    AWQ: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_mask = rm < M
    n_mask = rn < N
    # NOTE: output column n's nibble within its word: AWQ's interleaved order (0, 4, 1, 5, ...)
    # for both its weights and zeros; GPTQ's zeros in plain order.
    column = rn % 8
    if AWQ:
        n_shift = ((column // 2) + (column % 2) * 4) * 4
    else:
        n_shift = column * 4
    words_per_row = N // 8
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + rk
        k_mask = k < K
        x = tl.load(x_ptr + rm[:, None] * stride_xm + k[None, :], mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        tile_mask = k_mask[:, None] & n_mask[None, :]
        if AWQ:
            words = tl.load(qweight_ptr + k[:, None] * words_per_row + (rn // 8)[None, :], mask=tile_mask, other=0)
            q = (words >> n_shift[None, :]) & 0xF
        else:
            words = tl.load(qweight_ptr + (k // 8)[:, None] * N + rn[None, :], mask=tile_mask, other=0)
            q = (words >> ((k % 8) * 4)[:, None]) & 0xF
        g = tl.load(g_idx_ptr + k, mask=k_mask, other=0)
        zero_words = tl.load(qzeros_ptr + g[:, None] * words_per_row + (rn // 8)[None, :], mask=tile_mask, other=0)
        zeros = (zero_words >> n_shift[None, :]) & 0xF
        if not AWQ:
            zeros = zeros + 1  # NOTE: GPTQ v1 stores each zero minus one
        scales = tl.load(scales_ptr + g[:, None] * N + rn[None, :], mask=tile_mask, other=0.0).to(tl.float32)
        w = (q - zeros).to(tl.float32) * scales
        acc += tl.dot(x, w.to(x.dtype), input_precision=PRECISION)
    out = out_ptr + rm[:, None] * stride_om + rn[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def int4_matmul(
    x: torch.Tensor,
    qweight: torch.Tensor,
    qzeros: torch.Tensor,
    scales: torch.Tensor,
    g_idx: torch.Tensor,
    *,
    awq: bool,
) -> torch.Tensor:
    """``x`` ``[M, K]`` (rows contiguous) times the int4 weight ``[N, K]`` transposed: ``[M, N]``
    in ``x``'s dtype. ``awq``: AWQ's layout (qweight ``[K, N / 8]``), else GPTQ v1's
    (``[K / 8, N]``); ``g_idx`` int32 ``[K]`` the group of each input row."""
    assert x.dim() == 2 and x.stride(1) == 1, "int4_matmul takes a matrix with contiguous rows"
    m, k = x.shape
    n = scales.shape[1]
    assert g_idx.shape == (k,), f"x has {k} columns, g_idx {tuple(g_idx.shape)}"
    out = torch.empty((m, n), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    _int4_matmul_kernel[grid](
        x, qweight, qzeros, scales, g_idx, out,
        m, n, k, x.stride(0), out.stride(0),
        AWQ=awq, PRECISION=dot_precision(x.dtype),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
    )
    return out
