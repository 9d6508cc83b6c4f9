"""C++ kernels for the CPU path, compiled once per machine on first use.

NOTE: a C++ compiler is optional. ``load_cpu_kernels`` returns None when the kernels cannot
be built or loaded (no compiler, an unwritable cache), and callers fall back to torch ops.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.kernels.cpu.build import CPU_HEAD_DIMS, load_cpu_kernels

__all__ = ["CPU_HEAD_DIMS", "cpu_kernels_for", "cpu_kernels_for_heads", "load_cpu_kernels"]


def cpu_kernels_for(x: torch.Tensor) -> Any | None:
    """The kernels' namespace when ``x`` is a contiguous float32 CPU tensor and they load,
    else None: the elementwise kernels (RMSNorm, SiLU) take nothing else."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or not x.is_contiguous():
        return None
    return load_cpu_kernels()


def cpu_kernels_for_heads(x: torch.Tensor) -> Any | None:
    """Like ``cpu_kernels_for`` for a ``[tokens, heads, head_dim]`` view (q, k or v inside the
    fused qkv output): its heads must be contiguous within a token, tokens may lie apart."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() != 3:
        return None
    if x.stride(2) != 1 or x.stride(1) != x.shape[2]:
        return None
    return load_cpu_kernels()
