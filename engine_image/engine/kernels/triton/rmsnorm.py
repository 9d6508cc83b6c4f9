"""RMSNorm in one pass over each row, optionally fused with the residual add before it.

Rounds where the torch reference (engine.layers.rmsnorm) rounds: the sum ``x + residual``
and the normalised row are cast to the input dtype before the weight multiply, so fp16 and
bf16 outputs match it to the last bit or one.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(
    X, Residual, Out, W,
    stride_x, stride_r, stride_o,
    eps,
    N: tl.constexpr,
    BLOCK: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + row * stride_x + offs, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        r = tl.load(Residual + row * stride_r + offs, mask=mask, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(X.dtype.element_ty)
        # NOTE: the sum is the next layer's residual: written back in place.
        tl.store(Residual + row * stride_r + offs, x, mask=mask)
    xf = x.to(tl.float32)
    variance = tl.sum(xf * xf, 0) / N
    normed = (xf * tl.rsqrt(variance + eps)).to(X.dtype.element_ty)
    w = tl.load(W + offs, mask=mask, other=0.0)
    out = normed.to(tl.float32) * w.to(tl.float32)
    tl.store(Out + row * stride_o + offs, out.to(Out.dtype.element_ty), mask=mask)


def _launch(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float) -> torch.Tensor:
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out = torch.empty_like(x2)
    r2 = x2 if residual is None else residual.view(-1, shape[-1])
    block = triton.next_power_of_2(shape[-1])
    _rmsnorm_kernel[(x2.shape[0],)](
        x2, r2, out, weight,
        x2.stride(0), r2.stride(0), out.stride(0),
        eps,
        N=shape[-1],
        BLOCK=block,
        HAS_RESIDUAL=residual is not None,
        # NOTE: one row per program: wide rows get more warps instead of spilling registers.
        num_warps=min(max(block // 256, 1), 8),
    )
    return out.view(shape)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``weight * normalise(x)`` over the last dim of ``x`` (any leading shape)."""
    return _launch(x, None, weight, eps)


def fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``residual += x`` in place, then returns ``(rmsnorm(residual), residual)``.

    ``residual`` must be contiguous ``[..., hidden]`` with x's shape and dtype.
    """
    if not residual.is_contiguous() or residual.shape != x.shape or residual.dtype != x.dtype:
        raise ValueError("residual must be a contiguous tensor of x's shape and dtype")
    return _launch(x, residual, weight, eps), residual
