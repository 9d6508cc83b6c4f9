"""SiLU-and-mul: ``silu(gate) * up`` for the fused gate_up projection, in one pass."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_kernel(
    X, Out, stride_x, stride_o,
    N: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    gate = tl.load(X + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(X + row * stride_x + N + offs, mask=mask, other=0.0)
    # NOTE: rounded to the input dtype before the product, as torch's silu(gate) * up is.
    act = (gate / (1.0 + tl.exp(-gate))).to(up.dtype)
    out = act.to(tl.float32) * up.to(tl.float32)
    tl.store(Out + row * stride_o + offs, out.to(Out.dtype.element_ty), mask=mask)


def silu_and_mul(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """x: ``[T, 2 * I]`` (gate then up) -> ``[T, I]``."""
    num_tokens, double = x.shape
    if double % 2 or x.stride(-1) != 1:
        raise ValueError("x must be [tokens, 2 * intermediate] with a unit last stride")
    size = double // 2
    out = torch.empty(num_tokens, size, dtype=x.dtype, device=x.device)
    block = min(block, triton.next_power_of_2(size))
    _silu_and_mul_kernel[(num_tokens, triton.cdiv(size, block))](
        x, out, x.stride(0), out.stride(0), N=size, BLOCK=block, num_warps=min(max(block // 256, 1), 8)
    )
    return out
