"""Root-mean-square layer norm, computed in float32 like the reference implementation.

On CUDA (with triton installed) a fused Triton kernel runs it in one pass, on CPU in float32 a
C++ kernel; the torch code below is the reference those kernels are tested against, and the
path everywhere else.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from engine.kernels.cpu import cpu_kernels_for
from engine.kernels.triton import use_triton_kernels


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if use_triton_kernels(x):
            # NOTE: imported here, on CUDA only: importing it imports triton.
            from engine.kernels.triton.rmsnorm import rmsnorm

            return rmsnorm(x, self.weight, self.eps)
        kernels = self._cpu_kernels(x)
        if kernels is not None:
            out = torch.empty_like(x)
            kernels.rms_norm(x, out, self.weight, self.eps)
            return out
        if x.dtype == torch.float32:
            # NOTE: one fused op, the same float32 math as the lines below (bit-identical).
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        dtype = x.dtype
        x32 = x.to(torch.float32)
        variance = x32.pow(2).mean(-1, keepdim=True)
        return self.weight * (x32 * torch.rsqrt(variance + self.eps)).to(dtype)

    def add_and_norm(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``residual + x`` (the next residual) and its norm; one fused pass on CUDA and CPU."""
        if use_triton_kernels(x):
            from engine.kernels.triton.rmsnorm import fused_add_rmsnorm

            return fused_add_rmsnorm(x, residual, self.weight, self.eps)
        kernels = self._cpu_kernels(x)
        if kernels is not None and cpu_kernels_for(residual) is not None and residual.shape == x.shape:
            normed, total = torch.empty_like(x), torch.empty_like(x)
            kernels.add_rms_norm(x, residual, normed, total, self.weight, self.eps)
            return normed, total
        residual = residual + x
        return self(residual), residual

    def _cpu_kernels(self, x: torch.Tensor) -> Any | None:
        if self.weight.dtype != torch.float32 or self.weight.shape[0] != x.shape[-1]:
            return None
        return cpu_kernels_for(x)
