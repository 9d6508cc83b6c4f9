"""``y = x @ W^T`` with ``W`` an FP8 (float8_e4m3fn) weight and a float32 scale per output row
and run of ``SCALE_K`` input columns (``engine.layers.fp8_weight`` reads every checkpoint
layout into that one), dequantized in the kernel tile by tile: the weight-only path for GPUs
without FP8 tensor cores (before sm89), where ``torch._scaled_mm`` cannot run.

The weight comes in as its bytes (uint8) and is decoded with integer ops
(``kernels/triton/fp8_decode.py``), so no FP8 conversion instruction is needed. Each program computes a
``BLOCK_M x BLOCK_N`` tile of ``y``; per ``BLOCK_K`` step it decodes the weight tile, scales it
in float32 and multiplies in float32 or in ``x``'s half dtype on tensor cores, accumulating in
float32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.triton.dot import dot_precision
from engine.kernels.triton.fp8_decode import e4m3_to_float32

BLOCK_M = 16
BLOCK_N = 64
BLOCK_K = 32


@triton.jit
def _fp8_matmul_kernel(
    x_ptr,
    w_ptr,
    scale_ptr,
    out_ptr,
    M,
    N,
    K,
    SCALE_COLS,
    stride_xm,
    stride_om,
    SCALE_K: tl.constexpr,
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
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + rk
        k_mask = k < K
        x = tl.load(x_ptr + rm[:, None] * stride_xm + k[None, :], mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        tile_mask = k_mask[:, None] & n_mask[None, :]
        # NOTE: the weight is [N, K] row-major: the [BLOCK_K, BLOCK_N] tile reads it transposed.
        byte = tl.load(w_ptr + rn[None, :] * K + k[:, None], mask=tile_mask, other=0).to(tl.int32)
        scale = tl.load(scale_ptr + rn[None, :] * SCALE_COLS + (k // SCALE_K)[:, None], mask=tile_mask, other=0.0)
        w = e4m3_to_float32(byte) * scale
        acc += tl.dot(x, w.to(x.dtype), input_precision=PRECISION)
    out = out_ptr + rm[:, None] * stride_om + rn[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def fp8_matmul(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, scale_k: int) -> torch.Tensor:
    """``x`` ``[M, K]`` (rows contiguous) times the FP8 weight ``[N, K]`` (float8_e4m3fn,
    contiguous) transposed, each value times ``scale[n, k // scale_k]`` (float32): ``[M, N]``
    in ``x``'s dtype."""
    assert x.dim() == 2 and x.stride(1) == 1, "fp8_matmul takes a matrix with contiguous rows"
    assert weight.dtype == torch.float8_e4m3fn and weight.is_contiguous(), "fp8_matmul takes a contiguous e4m3fn weight"
    m, k = x.shape
    n = weight.shape[0]
    assert weight.shape[1] == k, f"x has {k} columns, the weight {weight.shape[1]}"
    assert scale.shape == (n, -(-k // scale_k)) and scale.is_contiguous(), f"scale {tuple(scale.shape)}"
    out = torch.empty((m, n), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    _fp8_matmul_kernel[grid](
        x, weight.view(torch.uint8), scale, out,
        m, n, k, scale.shape[1], x.stride(0), out.stride(0),
        SCALE_K=scale_k, PRECISION=dot_precision(x.dtype),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
    )
    return out
