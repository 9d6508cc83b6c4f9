"""C++ kernels for the CPU path, compiled once per machine on first use.

NOTE: a C++ compiler is optional. ``load_cpu_kernels`` returns None when the kernels cannot
be built or loaded (no compiler, an unwritable cache), and callers fall back to torch ops.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.kernels.cpu.build import CPU_HEAD_DIMS, load_cpu_kernels

__all__ = ["CPU_HEAD_DIMS", "cpu_kernels_for", "load_cpu_kernels"]


def cpu_kernels_for(x: torch.Tensor) -> Any | None:
    """The kernels' namespace when ``x`` is a contiguous float32 CPU tensor and they load,
    else None: the elementwise kernels (RMSNorm, SiLU) take nothing else."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or not x.is_contiguous():
        return None
    return load_cpu_kernels()
