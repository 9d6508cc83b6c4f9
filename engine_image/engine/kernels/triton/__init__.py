"""Triton GPU kernels (page-size-1 attention, RMSNorm, rotary, SiLU-and-mul).

NOTE: triton is optional. Nothing here imports it: the kernel modules do, and they are
imported lazily, only on CUDA devices (or by the CPU interpreter tests), so the engine
runs on CPU without triton installed.
"""

from __future__ import annotations

import importlib.util
from functools import cache

import torch


@cache
def triton_available() -> bool:
    """True when the triton package is installed (it is not imported here)."""
    return importlib.util.find_spec("triton") is not None


def use_triton_kernels(x: torch.Tensor) -> bool:
    """Whether layers should run their fused Triton kernel on ``x``: CUDA tensors only."""
    return x.is_cuda and triton_available()
